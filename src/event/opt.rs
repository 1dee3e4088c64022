//! [`Opt`], the tri-state optional member (absent, `null`, or a value): used by the envelope
//! (`types.rs`) and the payloads (`data.rs`) alike, so neither imports the other for it.

use rkyv::{Archive, Deserialize, Serialize};

/// An optional member: absent, given as `null`, or given. docs/events.md: absent ≠ `null`, and a
/// member given as `null` is kept as `null`.
///
/// For an open value (`Opt<Value>`), `null` always reads as [`Opt::Null`]; an
/// `Opt::Present(Value::Null)` built by hand is written as `null` and so reads back as `Opt::Null`.
#[derive(Archive, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub enum Opt<T> {
    /// The member is not there.
    #[default]
    Absent,
    /// The member is there with the value `null`.
    Null,
    /// The member is there with a value.
    Present(T),
}

impl<T> Opt<T> {
    /// The value, if present (`None` for absent and `null`).
    pub fn present(&self) -> Option<&T> {
        match self {
            Self::Present(v) => Some(v),
            _ => None,
        }
    }

    /// The value, if present, consuming `self`.
    pub fn into_present(self) -> Option<T> {
        match self {
            Self::Present(v) => Some(v),
            _ => None,
        }
    }

    /// An `Opt` of a reference to the value.
    pub fn as_ref(&self) -> Opt<&T> {
        match self {
            Self::Absent => Opt::Absent,
            Self::Null => Opt::Null,
            Self::Present(v) => Opt::Present(v),
        }
    }

    /// Maps the present value, keeping absent and `null`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Opt<U> {
        match self {
            Self::Absent => Opt::Absent,
            Self::Null => Opt::Null,
            Self::Present(v) => Opt::Present(f(v)),
        }
    }

    /// True when the member is not there.
    pub fn is_absent(&self) -> bool {
        matches!(self, Self::Absent)
    }

    /// True when the member is there as `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// True when the member is there with a value.
    pub fn is_present(&self) -> bool {
        matches!(self, Self::Present(_))
    }
}

impl<T> From<Option<T>> for Opt<T> {
    /// `None` becomes [`Opt::Absent`].
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Absent, Self::Present)
    }
}

impl<T: Archive> std::fmt::Debug for ArchivedOpt<T>
where
    T::Archived: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Absent => f.write_str("Absent"),
            Self::Null => f.write_str("Null"),
            Self::Present(v) => f.debug_tuple("Present").field(v).finish(),
        }
    }
}

impl<T: Archive> ArchivedOpt<T> {
    /// The archived value, if present (`None` for absent and `null`).
    pub fn present(&self) -> Option<&T::Archived> {
        match self {
            Self::Present(v) => Some(v),
            _ => None,
        }
    }

    /// True when the member is not there.
    pub fn is_absent(&self) -> bool {
        matches!(self, Self::Absent)
    }

    /// True when the member is there as `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }
}
