//! The `:::MLLOG` line encoder. Byte-compatible with `mlperf_logging.mllog` 4.1.68, which is
//! `json.dumps` of an ordered dict with Python's defaults: `", "` and `": "` separators,
//! `ensure_ascii=True`, floats spelled by `float.__repr__`, NaN/Infinity as bare tokens.

use std::fmt::Write;

use super::{Record, Value, MLLOG_TOKEN};

impl Record {
    /// Appends the `:::MLLOG {...}` line (without newline) to `out`.
    pub fn encode(&self, out: &mut String) {
        out.push_str(MLLOG_TOKEN);
        out.push_str("{\"namespace\": ");
        write_str(out, &self.namespace);
        out.push_str(", \"time_ms\": ");
        let _ = write!(out, "{}", self.time.millis());
        out.push_str(", \"event_type\": \"");
        out.push_str(self.event_type.as_str());
        out.push_str("\", \"key\": ");
        write_str(out, &self.key);
        out.push_str(", \"value\": ");
        write_value(out, &self.value);
        out.push_str(", \"metadata\": {");
        let md = &self.metadata;
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !first {
                out.push_str(", ");
            }
            first = false;
        };
        // A user field named `file`/`lineno` overrides the generated one in its place, as a
        // Python dict update does.
        if let Some(v) = md.get("file") {
            sep(out);
            out.push_str("\"file\": ");
            write_value(out, v);
        } else if let Some(file) = &md.file {
            sep(out);
            out.push_str("\"file\": ");
            write_str(out, file);
        }
        if let Some(v) = md.get("lineno") {
            sep(out);
            out.push_str("\"lineno\": ");
            write_value(out, v);
        } else if let Some(line) = md.lineno {
            sep(out);
            let _ = write!(out, "\"lineno\": {line}");
        }
        for (k, v) in &md.fields {
            if k == "file" || k == "lineno" {
                continue;
            }
            sep(out);
            write_str(out, k);
            out.push_str(": ");
            write_value(out, v);
        }
        out.push_str("}}");
    }
}

impl Value {
    /// The JSON text of this value, in Python's `json.dumps` spelling.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        write_value(&mut s, self);
        s
    }
}

/// Appends `v` in Python's `json.dumps` spelling.
pub(crate) fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        Value::Float(f) => write_float(out, *f),
        Value::Str(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// Python's `float.__repr__`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in `-5 < e < 16`, otherwise as `d.ddde±XX` (at least two exponent
/// digits); integral values keep a trailing `.0`.
pub(crate) fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("NaN");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    // Rust's `{:e}` gives the same shortest round-trip digits as Python's repr.
    let mut buf = String::with_capacity(32);
    let _ = write!(buf, "{f:e}");
    let (mantissa, exp) = buf
        .split_once('e')
        .expect("LowerExp always has an exponent");
    let exp: i32 = exp.parse().expect("LowerExp exponent is an integer");
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
    }
}

/// A JSON string with `ensure_ascii=True` escaping: printable ASCII as is, the usual short
/// escapes, everything else as `\uXXXX` (lower-case hex, surrogate pairs above the BMP).
pub(crate) fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let mut plain_from = 0;
    for (i, c) in s.char_indices() {
        if (' '..='~').contains(&c) && c != '"' && c != '\\' {
            continue;
        }
        out.push_str(&s[plain_from..i]);
        plain_from = i + c.len_utf8();
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            _ => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{u:04x}");
                }
            }
        }
    }
    out.push_str(&s[plain_from..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn py(f: f64) -> String {
        let mut s = String::new();
        write_float(&mut s, f);
        s
    }

    #[test]
    fn floats_use_python_repr() {
        for (f, want) in [
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (4e-4, "0.0004"),
            (2.4e-5, "2.4e-05"),
            (1e-8, "1e-08"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (0.92, "0.92"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1.2345678901234568e17, "1.2345678901234568e+17"),
            (-0.0, "-0.0"),
            (123.456, "123.456"),
            (-2.5e-7, "-2.5e-07"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ] {
            assert_eq!(py(f), want, "{f:?}");
        }
    }

    #[test]
    fn strings_are_ascii_escaped() {
        let mut s = String::new();
        write_str(&mut s, "é😀\"\\\n\t\u{1}/\u{7f}");
        assert_eq!(s, r#""\u00e9\ud83d\ude00\"\\\n\t\u0001/\u007f""#);
    }
}
