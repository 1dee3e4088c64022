//! The storage engine: segments, records, the seq index, recovery, writer and readers.
