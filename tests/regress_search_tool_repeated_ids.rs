//! `search --tool` matched an `approval/decision` to a tool by `(turn, callId)`: with call ids
//! repeated across the steps of a turn, a decision about a `read` call in step 2 showed up under
//! `--tool bash` because step 1 had a `bash` call with the same id.

mod cli_common;

use cli_common::Cli;

#[test]
fn a_decision_belongs_to_the_tool_of_its_own_step() {
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"tool/call","seq":2,"time":3,"data":{"turn":1,"step":1,"callId":"x","name":"bash","arguments":"{}"}}"#,
        r#"{"type":"tool/result","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"role":"tool","toolName":"bash","content":"ok","isError":false},"callId":"x"}}"#,
        r#"{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}"#,
        r#"{"type":"step/start","seq":5,"time":6,"data":{"turn":1,"step":2}}"#,
        r#"{"type":"tool/call","seq":6,"time":7,"data":{"turn":1,"step":2,"callId":"x","name":"read","arguments":"{}"}}"#,
        r#"{"type":"approval/request","seq":7,"time":8,"data":{"turn":1,"step":2,"callId":"x","tool":"read"}}"#,
        r#"{"type":"approval/decision","seq":8,"time":9,"data":{"turn":1,"step":2,"callId":"x","decision":"denied"}}"#,
        r#"{"type":"tool/result","seq":9,"time":10,"data":{"turn":1,"step":2,"message":{"role":"tool","toolName":"read","content":"denied","isError":true},"callId":"x"}}"#,
        r#"{"type":"step/end","seq":10,"time":11,"data":{"turn":1,"step":2}}"#,
        r#"{"type":"turn/end","seq":11,"time":12,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    let cli = Cli::new();
    let input = lines.join("\n") + "\n";
    let id = cli
        .run_with(&["import", "-"], input.as_bytes())
        .ok()
        .trim_end()
        .to_string();
    let seqs = |tool: &str| -> Vec<u64> {
        cli.run(&["search", "--session", &id, "--tool", tool, "--json"])
            .ok()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["event"]["seq"].as_u64().unwrap()
            })
            .collect()
    };
    assert_eq!(seqs("bash"), [2, 3]);
    assert_eq!(seqs("read"), [6, 7, 8, 9]);
}
