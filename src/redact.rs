//! The one place that removes secrets from text before it is shown: error messages of
//! object_store, reqwest and the OTLP exporters, our own reports and `Debug` output.
//!
//! Three things are masked with `***`: known secret values (option values and the
//! credential/endpoint variables of AWS, Google Cloud, Azure and OTLP), the user info of every
//! URL in the text (`http://user:PASS@host` → `http://user:***@host`), and the values of
//! signature- and token-like query parameters and connection-string fields
//! (`X-Amz-Signature=`, `sig=`, `token=`, `AccountKey=`, ...). It needs no parser for the
//! text it cleans: error messages are free text with URLs somewhere inside.

use std::ffi::OsString;

/// What replaces a secret.
pub(crate) const MASK: &str = "***";

/// Shortest known value that is masked wherever it appears: shorter ones (`test`, `true`)
/// would mask ordinary words. User info and secret parameters in URLs are masked whatever
/// their length.
const MIN_SECRET_LEN: usize = 6;

/// Name fragments (lowercase) of option keys and variables whose values are secret.
const SECRET_WORDS: &[&str] = &[
    "secret",
    "key",
    "token",
    "password",
    "passwd",
    "sas",
    "credential",
    "signature",
    "bearer",
    "session",
    "service_account",
    "client_id",
    "tenant",
    "authorization",
    "headers",
];

/// Name fragments (lowercase) of variables that hold URLs, whose user info and query may carry
/// credentials (`AWS_ENDPOINT_URL=http://user:pass@host`).
const URL_WORDS: &[&str] = &["endpoint", "url", "uri", "host", "proxy"];

/// Prefixes of the provider variables that object_store and opentelemetry-otlp read.
const PROVIDER_PREFIXES: &[&str] = &[
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "GCS_",
    "GCE_",
    "SERVICE_ACCOUNT",
    "OBJECT_STORE_",
    "OTEL_EXPORTER_OTLP_",
    "MSI_",
    "IDENTITY_",
];

/// Query parameters and `key=value` fields (lowercase names) whose values are secret.
const SECRET_PARAMS: &[&str] = &[
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "x-goog-signature",
    "x-goog-credential",
    "access_token",
    "token",
    "code",
    "password",
    "secret",
    "client_secret",
    "accountkey",
    "sharedaccesssignature",
    "sv_sig",
    "key",
    "api_key",
    "apikey",
    "authorization",
];

/// Whether an option key or variable name names a secret value.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| n.contains(w))
}

fn is_url_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    URL_WORDS.iter().any(|w| n.contains(w))
}

/// The secret parts of one configured value under `name`: the whole value for credential
/// names; for URL-valued names the user info and query values (the host stays readable).
pub(crate) fn secret_parts(name: &str, value: &str, out: &mut Vec<String>) {
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    if is_secret_name(name) {
        out.push(value.to_string());
        // A JSON service-account key: its private key may also be shown with `\n` unescaped.
        if value.contains("\\n") {
            out.push(value.replace("\\n", "\n"));
        }
    } else if is_url_name(name) {
        url_secret_parts(value, out);
    }
}

/// User info (both halves) and query values of a URL-like value.
fn url_secret_parts(value: &str, out: &mut Vec<String>) {
    let Some(scheme_end) = value.find("://") else {
        // Not a URL: a bare host or a mistake; neither is shown in full.
        out.push(value.to_string());
        return;
    };
    let rest = &value[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..authority_end].rfind('@') {
        // `user:password@`: the password; `token@`: the whole user info.
        let userinfo = &rest[..at];
        out.push(
            userinfo
                .split_once(':')
                .map_or(userinfo, |(_, p)| p)
                .to_string(),
        );
    }
    if let Some(q) = rest.find('?') {
        let query = &rest[q + 1..];
        let query = &query[..query.find('#').unwrap_or(query.len())];
        for pair in query.split('&') {
            if let Some((_, v)) = pair.split_once('=')
                && v.len() >= MIN_SECRET_LEN
            {
                out.push(v.to_string());
            }
        }
    }
}

/// `url` without its user info, or `None` when it has none.
#[cfg(feature = "object-store")]
pub(crate) fn strip_userinfo(url: &str) -> Option<String> {
    let start = url.find("://")? + 3;
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |e| start + e);
    let at = url[start..authority_end].rfind('@')? + start;
    Some(format!("{}{}", &url[..start], &url[at + 1..]))
}

/// Secret values among the provider variables of `vars` (credentials whole; endpoints by
/// their user info and query). Non-UTF-8 values are compared in their lossy form.
pub(crate) fn secrets_from_vars(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in vars {
        let Some(k) = k.to_str() else { continue };
        if PROVIDER_PREFIXES.iter().any(|p| k.starts_with(p)) {
            secret_parts(k, &v.to_string_lossy(), &mut out);
        }
    }
    out
}

/// [`secrets_from_vars`] over the process environment (never panics on non-UTF-8 entries).
#[cfg(feature = "object-store")]
pub(crate) fn env_secrets() -> Vec<String> {
    secrets_from_vars(std::env::vars_os())
}

/// Sorts longest first (so that a secret containing another is masked whole) and dedups.
pub(crate) fn normalize(secrets: &mut Vec<String>) {
    secrets.retain(|s| s.len() >= MIN_SECRET_LEN);
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
}

/// Removes secrets from `message`: the given secret values, URL user info and secret query
/// parameters / connection-string fields.
pub(crate) fn redact(message: &str, secrets: &[String]) -> String {
    let mut out = message.to_string();
    for s in secrets {
        if s.len() >= MIN_SECRET_LEN && out.contains(s.as_str()) {
            out = out.replace(s.as_str(), MASK);
        }
    }
    out = redact_userinfo(&out);
    redact_params(&out)
}

/// `scheme://user:pass@host` → `scheme://user:***@host`; `scheme://token@host` →
/// `scheme://***@host`, except for the Azure forms where the user part is the container
/// (`abfs://container@account...`, `az://`, `abfss://`, `wasb[s]://`).
fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let scheme_start = rest[..pos]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.'))
            .map_or(0, |p| p + 1);
        let scheme = rest[scheme_start..pos].to_ascii_lowercase();
        let after = &rest[pos + 3..];
        let authority_end = after
            .find(|c: char| {
                matches!(
                    c,
                    '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>' | ')' | ']' | ','
                ) || c.is_whitespace()
            })
            .unwrap_or(after.len());
        out.push_str(&rest[..pos + 3]);
        let authority = &after[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                let container_user = matches!(
                    scheme.as_str(),
                    "abfs" | "abfss" | "az" | "azure" | "adl" | "wasb" | "wasbs"
                );
                match userinfo.split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push(':');
                        out.push_str(MASK);
                    }
                    None if container_user => out.push_str(userinfo),
                    None => out.push_str(MASK),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}

/// Masks the values of `name=value` where `name` is a secret parameter and is preceded by `?`,
/// `&`, `;`, whitespace or the start of the text.
fn redact_params(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let at_boundary = i == 0
            || matches!(bytes[i - 1], b'?' | b'&' | b';' | b'(' | b'"' | b'\'')
            || bytes[i - 1].is_ascii_whitespace();
        if at_boundary && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            let name_end = text[i..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .map_or(text.len(), |e| i + e);
            if bytes.get(name_end) == Some(&b'=') {
                let name = text[i..name_end].to_ascii_lowercase();
                if SECRET_PARAMS.contains(&name.as_str()) || is_secret_name(&name) {
                    let start = name_end + 1;
                    let end = text[start..]
                        .find(|c: char| {
                            matches!(c, '&' | ';' | ')' | '"' | '\'' | ',' | '>' | ']' | '#')
                                || c.is_whitespace()
                        })
                        .map_or(text.len(), |e| start + e);
                    if end > start {
                        out.push_str(&text[copied..start]);
                        out.push_str(MASK);
                        copied = end;
                    }
                    i = end.max(name_end + 1);
                    continue;
                }
            }
            i = name_end.max(i + 1);
            continue;
        }
        i += text[i..].chars().next().map_or(1, char::len_utf8);
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_userinfo_and_parameters() {
        let secrets = vec!["hunter2hunter2".to_string()];
        let msg = "error for url (http://h/c/b?sv=1&sig=abcDEF%2B&se=2) key hunter2hunter2";
        let out = redact(msg, &secrets);
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("abcDEF"), "{out}");
        assert!(out.contains("sv=1"), "{out}");

        let out = redact(
            "error sending request for url (http://user:PaSs99@127.0.0.1:9/b/k): refused",
            &[],
        );
        assert_eq!(
            out,
            "error sending request for url (http://user:***@127.0.0.1:9/b/k): refused"
        );
        assert_eq!(
            redact("see https://ghp_tok3n@host/x", &[]),
            "see https://***@host/x"
        );
        assert_eq!(
            redact("abfs://container@acct.dfs.core.windows.net/k", &[]),
            "abfs://container@acct.dfs.core.windows.net/k"
        );
        let out = redact(
            "GET https://b.s3.amazonaws.com/k?X-Amz-Credential=AKID%2F1&X-Amz-Signature=deadbeef&x=1",
            &[],
        );
        assert!(!out.contains("AKID") && !out.contains("deadbeef"), "{out}");
        assert!(out.contains("x=1"), "{out}");
        let out = redact(
            "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=Zm9vYmFy==;",
            &[],
        );
        assert!(!out.contains("Zm9vYmFy"), "{out}");
        assert!(out.contains("AccountName=a"), "{out}");
        assert_eq!(
            redact("plain text, no secrets", &[]),
            "plain text, no secrets"
        );
        assert_eq!(redact("ünïcödé ?token=x€y z", &[]), "ünïcödé ?token=*** z");
    }

    #[test]
    #[cfg(feature = "object-store")]
    fn userinfo_is_stripped() {
        assert_eq!(
            strip_userinfo("http://u:p@h:9/x?y=z@w").as_deref(),
            Some("http://h:9/x?y=z@w")
        );
        assert_eq!(strip_userinfo("http://h:9/a@b"), None);
        assert_eq!(strip_userinfo("h:9"), None);
    }

    #[test]
    fn provider_variables() {
        let vars = [
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t-value"),
            (
                "AWS_ENDPOINT_URL",
                "http://user:EndpointPass@host:9000/?token=QueryTok",
            ),
            ("AWS_REGION", "us-east-1"),
            ("AZURE_STORAGE_SAS_KEY", "sv=2020&sig=abcd"),
            ("HOME", "/root/secret-home"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let mut s = secrets_from_vars(vars);
        normalize(&mut s);
        assert!(s.contains(&"s3cr3t-value".to_string()));
        assert!(s.contains(&"EndpointPass".to_string()));
        assert!(s.contains(&"QueryTok".to_string()));
        assert!(s.contains(&"sv=2020&sig=abcd".to_string()));
        assert!(
            !s.iter().any(|v| v == "us-east-1" || v.contains("home")),
            "{s:?}"
        );
    }
}
