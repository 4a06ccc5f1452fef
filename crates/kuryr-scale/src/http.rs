//! One plain HTTP GET to a component on loopback (the API server's `/metrics`, the model's
//! `/__model/stats`), over hyper's client.

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};

use crate::Error;

/// The body of `GET url` (a 2xx answer).
pub async fn get_text(url: &str) -> Result<String, Error> {
    let fail = |m: String| Error::Start {
        what: url.to_string(),
        message: m,
    };
    let uri: http::Uri = url.parse().map_err(|e| fail(format!("not a URL: {e}")))?;
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let resp = client.get(uri).await.map_err(|e| fail(e.to_string()))?;
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| fail(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        return Err(fail(format!("answered {status}")));
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The sum of `apiserver_request_total` over every verb but `watch` (requests, not streams).
pub fn api_requests(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && !l.contains("verb=\"watch\""))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, n)| n.trim().parse::<u64>().ok()))
        .sum()
}

#[cfg(test)]
mod tests {
    #[test]
    fn requests_without_watches() {
        let m = "# HELP x\napiserver_request_total{verb=\"list\",resource=\"pods\"} 5\n\
                 apiserver_request_total{verb=\"watch\",resource=\"pods\"} 9\n\
                 apiserver_request_total{verb=\"patch\",resource=\"kuryrports\"} 7\n";
        assert_eq!(super::api_requests(m), 12);
    }
}
