//! The kubelet's `/containerLogs/{namespace}/{pod}/{container}` (what the API server relays
//! `pods/{name}/log` to): the container's current or `previous` log file, its last `tailLines`,
//! at most `limitBytes`, and with `follow` the new lines as they come until the container ends.

use std::{path::PathBuf, sync::Arc, time::Duration};

use axum::{
    body::Body,
    extract::{Path, RawQuery, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::Ctx;
use crate::containers::{container_log_path, pod_dir};

fn failure(code: StatusCode, message: String) -> Response {
    let reason = if code == StatusCode::NOT_FOUND {
        "NotFound"
    } else {
        "BadRequest"
    };
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()});
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The newest run number with a log file, if any.
fn latest_run(dir: &std::path::Path) -> Option<u32> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .max()
}

fn tail(text: &[u8], lines: Option<usize>) -> &[u8] {
    let Some(n) = lines else { return text };
    if n == 0 {
        return &text[text.len()..];
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &text[i + 1..];
            }
        }
    }
    text
}

/// `GET /containerLogs/{namespace}/{pod}/{container}`.
pub(crate) async fn handler(
    State(ctx): State<Arc<Ctx>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let q: Vec<(String, String)> = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .into_owned()
        .collect();
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let flag = |k: &str| get(k).is_some_and(|v| v == "true" || v == "1");
    let tail_lines = match get("tailLines").map(str::parse::<i64>) {
        None => None,
        Some(Ok(n)) if n >= 0 => Some(n as usize),
        Some(_) => {
            return failure(
                StatusCode::BAD_REQUEST,
                "tailLines must be a non-negative integer".into(),
            );
        }
    };
    let limit = get("limitBytes").and_then(|v| v.parse::<usize>().ok());
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let p = match api.get_opt(&pod).await {
        Ok(Some(p)) => p,
        Ok(None) => return failure(StatusCode::NOT_FOUND, format!("pod {namespace}/{pod} not found")),
        Err(e) => {
            return failure(
                StatusCode::BAD_REQUEST,
                format!("reading pod {namespace}/{pod}: {e}"),
            );
        }
    };
    let logs_dir = pod_dir(&ctx, &p).join("logs").join(&container);
    let Some(latest) = latest_run(&logs_dir) else {
        return failure(
            StatusCode::BAD_REQUEST,
            format!(
                "container \"{container}\" in pod \"{}\" is waiting to start: ContainerCreating",
                p.name_any()
            ),
        );
    };
    let previous = flag("previous");
    let run = if previous {
        match latest.checked_sub(1) {
            Some(r) => r,
            None => {
                return failure(
                    StatusCode::BAD_REQUEST,
                    format!("previous terminated container \"{container}\" in pod \"{pod}\" not found"),
                );
            }
        }
    } else {
        latest
    };
    let path = container_log_path(&pod_dir(&ctx, &p), &container, run);
    let text = tokio::fs::read(&path).await.unwrap_or_default();
    let mut first = tail(&text, tail_lines).to_vec();
    if let Some(l) = limit {
        first.truncate(l);
    }
    let text_plain = [(header::CONTENT_TYPE, "text/plain")];
    if !flag("follow") || previous {
        return (StatusCode::OK, text_plain, first).into_response();
    }
    let state = (Some(first), path, text.len() as u64, logs_dir, run);
    let stream = futures::stream::unfold(state, follow_step);
    (StatusCode::OK, text_plain, Body::from_stream(stream)).into_response()
}

type FollowState = (Option<Vec<u8>>, PathBuf, u64, PathBuf, u32);

/// Next chunk of a followed log: new bytes of the file, until a newer run starts or the
/// pod's directory goes away.
async fn follow_step(st: FollowState) -> Option<(Result<Vec<u8>, std::io::Error>, FollowState)> {
    let (first, path, mut offset, dir, run) = st;
    if let Some(f) = first {
        return Some((Ok(f), (None, path, offset, dir, run)));
    }
    loop {
        let len = tokio::fs::metadata(&path).await.ok()?.len();
        if len > offset {
            let all = tokio::fs::read(&path).await.ok()?;
            let chunk = all.get(offset as usize..).unwrap_or_default().to_vec();
            offset = all.len() as u64;
            return Some((Ok(chunk), (None, path, offset, dir, run)));
        }
        if latest_run(&dir).is_some_and(|l| l > run) {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_count_lines_from_the_end() {
        assert_eq!(tail(b"a\nb\nc\n", Some(2)), b"b\nc\n");
        assert_eq!(tail(b"a\nb\nc", Some(1)), b"c");
        assert_eq!(tail(b"a\nb\n", Some(5)), b"a\nb\n");
        assert_eq!(tail(b"a\nb\n", Some(0)), b"");
        assert_eq!(tail(b"a\nb\n", None), b"a\nb\n");
    }
}
