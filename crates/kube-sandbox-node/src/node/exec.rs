//! One `kubectl exec` session on the kubelet side: the request's parameters, the command run in
//! the pod's network namespace (`nsenter --net=…`; the emulated containers have no filesystem of
//! their own, so the command is the machine's), and the Kubernetes remote-command stream protocol
//! over WebSocket (`v5.channel.k8s.io`, `v4.channel.k8s.io`): every binary message starts with its
//! channel (0 stdin, 1 stdout, 2 stderr, 3 the final status, 4 terminal resize, 255 — v5 only —
//! "this stream is closed"), and the session ends with the status on channel 3, which carries the
//! exit code for kubectl to exit with.

use std::{path::PathBuf, process::Stdio};

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};
use tracing::{debug, info};

/// Sub-protocols served, most preferred first.
pub const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const CLOSE: u8 = 255;

/// What the client asked for (the query of `/exec/{ns}/{pod}/{container}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The client sends stdin.
    pub stdin: bool,
    /// The client wants stdout.
    pub stdout: bool,
    /// The client wants stderr.
    pub stderr: bool,
    /// The client asked for a terminal (no pty here: stderr is merged into stdout, as with one).
    pub tty: bool,
}

impl ExecRequest {
    /// Parses the query; errors name what is wrong.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut r = Self {
            command: Vec::new(),
            stdin: false,
            stdout: false,
            stderr: false,
            tty: false,
        };
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            let flag = || match v.as_ref() {
                "true" | "1" => Ok(true),
                "false" | "0" | "" => Ok(false),
                other => Err(format!("invalid value {other:?} for {k:?}: want true or false")),
            };
            match k.as_ref() {
                "command" => r.command.push(v.clone().into_owned()),
                "stdin" | "input" => r.stdin = flag()?,
                "stdout" | "output" => r.stdout = flag()?,
                "stderr" | "error" => r.stderr = flag()?,
                "tty" => r.tty = flag()?,
                _ => {}
            }
        }
        if r.command.is_empty() {
            return Err("you must specify at least 1 command".into());
        }
        if !(r.stdin || r.stdout || r.stderr) {
            return Err("you must specify at least 1 of stdin, stdout, stderr".into());
        }
        if r.tty && r.stderr {
            // A terminal has one output stream (kubelet refuses both as well).
            r.stderr = false;
        }
        Ok(r)
    }
}

/// The status sent on channel 3 when the command ends with `code` (`None`: killed by a signal).
pub fn exit_status(command: &[String], code: Option<i32>) -> Value {
    match code {
        Some(0) => json!({"metadata": {}, "status": "Success"}),
        Some(c) => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!(
                "command terminated with non-zero exit code: error executing command {command:?}, exit code {c}"
            ),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": c.to_string()}]},
        }),
        None => failure(&format!("command {command:?} was killed by a signal")),
    }
}

fn failure(message: &str) -> Value {
    json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500})
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::Binary(Bytes::from(v))
}

/// Runs the session to its end; `netns` is the pod's namespace file.
pub async fn run(mut ws: WebSocket, netns: PathBuf, req: ExecRequest, pod: String) {
    let pipe = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    let mut cmd = tokio::process::Command::new("nsenter");
    cmd.arg(format!("--net={}", netns.display()))
        .arg("--")
        .args(&req.command)
        .stdin(pipe(req.stdin))
        .stdout(pipe(req.stdout))
        .stderr(pipe(req.stderr || req.tty))
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let status = failure(&format!("cannot start {:?}: nsenter: {e}", req.command));
            finish(&mut ws, &status).await;
            return;
        }
    };
    info!(%pod, command = ?req.command, "exec");
    let (tx, mut out) = mpsc::channel::<(u8, Bytes)>(16);
    if let Some(s) = child.stdout.take() {
        tokio::spawn(pump(s, STDOUT, tx.clone()));
    }
    if let Some(s) = child.stderr.take() {
        tokio::spawn(pump(s, if req.tty { STDOUT } else { STDERR }, tx.clone()));
    }
    drop(tx);
    // Stdin goes through its own task so a command that does not read cannot stall the session.
    let mut stdin = child.stdin.take().map(|mut w| {
        let (tx, mut rx) = mpsc::channel::<Bytes>(16);
        tokio::spawn(async move {
            while let Some(b) = rx.recv().await {
                if w.write_all(&b).await.is_err() {
                    break;
                }
            }
        });
        tx
    });
    loop {
        tokio::select! {
            o = out.recv() => match o {
                Some((ch, data)) => {
                    if ws.send(frame(ch, &data)).await.is_err() {
                        debug!(%pod, "exec client went away; killing the command");
                        return;
                    }
                }
                None => break,
            },
            m = ws.recv() => match m {
                Some(Ok(Message::Binary(b))) => match b.first() {
                    Some(&STDIN) => {
                        if let Some(w) = &stdin
                            && w.send(b.slice(1..)).await.is_err()
                        {
                            stdin = None;
                        }
                    }
                    Some(&CLOSE) if b.get(1) == Some(&STDIN) => stdin = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    debug!(%pod, "exec client closed the stream; killing the command");
                    return;
                }
                Some(Ok(_)) => {}
            },
        }
    }
    drop(stdin);
    let status = match child.wait().await {
        Ok(s) => exit_status(&req.command, s.code()),
        Err(e) => failure(&format!("waiting for {:?}: {e}", req.command)),
    };
    finish(&mut ws, &status).await;
}

async fn pump(mut r: impl AsyncRead + Unpin, channel: u8, tx: mpsc::Sender<(u8, Bytes)>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx
                    .send((channel, Bytes::copy_from_slice(&buf[..n])))
                    .await
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

async fn finish(ws: &mut WebSocket, status: &Value) {
    let _ = ws.send(frame(STATUS, status.to_string().as_bytes())).await;
    let _ = ws
        .send(Message::Close(Some(CloseFrame {
            code: 1000,
            reason: "".into(),
        })))
        .await;
    // Let the client answer the close before the connection drops.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        while let Some(Ok(m)) = ws.recv().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubectl_query() {
        let r =
            ExecRequest::parse("command=sh&command=-c&command=echo+hi&container=c&stderr=true&stdout=true")
                .unwrap();
        assert_eq!(r.command, ["sh", "-c", "echo hi"]);
        assert!(r.stdout && r.stderr && !r.stdin && !r.tty);
        let r = ExecRequest::parse("command=cat&stdin=true&stdout=true&stderr=true&tty=true").unwrap();
        assert!(r.stdin && r.tty && !r.stderr, "a terminal has one output stream");
    }

    #[test]
    fn rejects_bad_queries_by_name() {
        assert!(
            ExecRequest::parse("stdout=true")
                .unwrap_err()
                .contains("at least 1 command")
        );
        assert!(
            ExecRequest::parse("command=ls")
                .unwrap_err()
                .contains("stdin, stdout, stderr")
        );
        let e = ExecRequest::parse("command=ls&stdout=yes").unwrap_err();
        assert!(e.contains("\"stdout\""), "{e}");
    }

    #[test]
    fn exit_codes_become_kubectl_statuses() {
        let cmd = vec!["false".to_string()];
        assert_eq!(exit_status(&cmd, Some(0))["status"], "Success");
        let s = exit_status(&cmd, Some(3));
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(
            s["details"]["causes"][0],
            json!({"reason": "ExitCode", "message": "3"})
        );
        assert_eq!(exit_status(&cmd, None)["status"], "Failure");
    }
}
