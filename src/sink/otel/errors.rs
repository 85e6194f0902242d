//! Export failures in words. The OTLP exporters report a failure as the transport's error
//! chain (tonic's status with its nested source, reqwest's message); an operator needs three
//! things from it: which signal, which endpoint, and whether the collector refused the
//! connection, did not answer in time, or answered with an error status.

use std::time::Duration;

use crate::sink::accounting::seconds;

/// An OTLP signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Traces,
    Metrics,
}

/// Longest excerpt of the exporter's own message kept after the cause.
const MAX_DETAIL: usize = 300;

/// What the messages need of the environment the exporters were configured from: its
/// secrets (to mask) and the export timeout (to tell a timeout from other failures).
#[derive(Clone, Debug)]
pub(crate) struct ExportEnv {
    pub secrets: Vec<String>,
    pub timeout: Duration,
}

impl ExportEnv {
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (default 10 s) and the secrets of `env`.
    pub(crate) fn from_env(env: &crate::env::Env) -> ExportEnv {
        // A bad timeout is the exporter's to report; here it only shapes a message.
        let ms = env
            .number("OTEL_EXPORTER_OTLP_TIMEOUT", 0, u64::MAX, "milliseconds")
            .ok()
            .flatten()
            .unwrap_or(10_000);
        ExportEnv {
            secrets: env.secrets(),
            timeout: Duration::from_millis(ms),
        }
    }
}

/// `traces to http://10.0.0.5:4317: connection refused (3 spans lost): <detail>`.
/// `endpoint` is already redacted; the exporter's message is redacted here.
pub(crate) fn describe(
    signal: Signal,
    endpoint: Option<&str>,
    error: &str,
    what: &str,
    took: Duration,
    env: &ExportEnv,
) -> String {
    let signal = match signal {
        Signal::Traces => "traces",
        Signal::Metrics => "metrics",
    };
    let to = endpoint.map(|e| format!(" to {e}")).unwrap_or_default();
    let mut detail = crate::redact::redact(error, &env.secrets);
    if detail.len() > MAX_DETAIL {
        let mut end = MAX_DETAIL;
        while !detail.is_char_boundary(end) {
            end -= 1;
        }
        detail.truncate(end);
        detail.push('…');
    }
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(" ({what})")
    };
    let timeout = env.timeout;
    let mut why = cause(error, timeout);
    if why == "export failed" && took + Duration::from_millis(200) >= timeout {
        // The request used up the exporter's whole timeout (the HTTP exporter says only
        // "network error" then).
        why = format!("timed out after {}", seconds(timeout));
    } else if why == "export failed" && error.contains("network error") {
        // The HTTP exporter keeps no cause for a transport failure ("network error"): ask
        // the network once, from this (export) thread.
        if let Some(found) = endpoint.and_then(probe) {
            why = found;
        }
    }
    format!("{signal}{to}: {why}{what}: {detail}")
}

/// How long [`probe`] waits for a connection.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Why a TCP connection to the endpoint's host and port fails, if it does.
fn probe(endpoint: &str) -> Option<String> {
    use std::net::{TcpStream, ToSocketAddrs};
    let (scheme, rest) = endpoint.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let default_port = if scheme == "https" { 443 } else { 80 };
    let target = if host_port.ends_with(']') || !host_port.contains(':') {
        format!("{host_port}:{default_port}")
    } else {
        host_port.to_owned()
    };
    let addrs: Vec<_> = match target.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(_) => return Some("host not found".to_owned()),
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) {
            Ok(_) => return None,
            Err(e) => last = Some(e),
        }
    }
    let e = last?;
    Some(match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => format!(
            "no answer within {} s (connecting)",
            PROBE_TIMEOUT.as_secs()
        ),
        _ => format!("cannot connect: {e}"),
    })
}

/// The cause of an exporter error, from its text.
pub(crate) fn cause(error: &str, timeout: Duration) -> String {
    let e = error.to_ascii_lowercase();
    if e.contains("connection refused") || e.contains("os error 111") {
        return "connection refused".to_owned();
    }
    if e.contains("timed out")
        || e.contains("timeout")
        || e.contains("deadline")
        || e.contains("deadlineexceeded")
    {
        return format!("timed out after {}", seconds(timeout));
    }
    if e.contains("failed to lookup address")
        || e.contains("dns error")
        || e.contains("name or service not known")
    {
        return "host not found".to_owned();
    }
    if e.contains("connection reset") || e.contains("broken pipe") {
        return "connection reset".to_owned();
    }
    if let Some(code) = http_status(&e) {
        return format!("HTTP status {code}");
    }
    if let Some(code) = grpc_code(error) {
        return format!("gRPC status {code}");
    }
    "export failed".to_owned()
}

/// A 3-digit HTTP status after `status code` / `status:` in lower-cased text.
fn http_status(e: &str) -> Option<u16> {
    for marker in ["status code: ", "status code ", "status: ", "http status "] {
        if let Some(at) = e.find(marker) {
            let digits: String = e[at + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(code) = digits.parse::<u16>()
                && (100..600).contains(&code)
            {
                return Some(code);
            }
        }
    }
    None
}

/// tonic's `code: Unavailable` (original case).
fn grpc_code(e: &str) -> Option<String> {
    let at = e.find("code: ")?;
    let code: String = e[at + 6..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect();
    (!code.is_empty()).then_some(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_in_words() {
        let refused = "Export failed: status: Unavailable, message: \"tcp connect error\", \
                       source: Connection refused (os error 111)";
        let t = Duration::from_secs(10);
        assert_eq!(cause(refused, t), "connection refused");
        assert_eq!(
            cause("Export failed: code: DeadlineExceeded", t),
            "timed out after 10 s"
        );
        assert_eq!(
            cause("HTTP export failed. Status Code: 503, Response: busy", t),
            "HTTP status 503"
        );
        assert_eq!(
            cause("status: Unimplemented, code: Unimplemented", t),
            "gRPC status Unimplemented"
        );
        let msg = describe(
            Signal::Metrics,
            Some("http://127.0.0.1:9"),
            refused,
            "",
            Duration::ZERO,
            &ExportEnv {
                secrets: Vec::new(),
                timeout: t,
            },
        );
        assert!(
            msg.starts_with("metrics to http://127.0.0.1:9: connection refused: Export failed"),
            "{msg}"
        );
    }
}
