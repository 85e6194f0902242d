//! A record's key read in one forward walk over its bytes, building nothing: the walk accepts
//! only text that Python's `json.loads` takes as an object with a string `key` (no escapes), a
//! numeric `time_ms`, a `value` and a `metadata`, none of the four twice, all of it ASCII.
//! Anything else (escapes, `NaN`, non-ASCII bytes, deep nesting, a malformed record) is left to
//! the official parser's path, which gives its errors and crashes; so a `None` here is never
//! a verdict, only "read it the slow way".
//!
//! Hand-written rather than serde_json's `IgnoredAny`: the scan of a large log is mostly this
//! walk, and serde's generic visitor machinery costs several times as much per byte for the
//! same answer.

/// How deep values may nest before the walk gives up (the slow path decides).
const MAX_DEPTH: usize = 100;

/// What a walk makes of the values it reads: nothing (the scan), or Python objects (a record
/// a rule reads), so that both read one grammar.
pub(crate) trait Make {
    type Out;
    type Dict;
    fn literal(&mut self, word: &[u8]) -> Self::Out;
    /// `text` is a number of JSON's grammar; `float` when it has a fraction or an exponent.
    fn number(&mut self, text: &[u8], float: bool) -> Self::Out;
    fn string(&mut self, text: &[u8]) -> Self::Out;
    fn list(&mut self, items: Vec<Self::Out>) -> Self::Out;
    fn dict(&mut self) -> Self::Dict;
    fn entry(&mut self, dict: &mut Self::Dict, key: &[u8], value: Self::Out);
    fn end_dict(&mut self, dict: Self::Dict) -> Self::Out;
}

/// The walk that makes nothing.
struct Skip;

impl Make for Skip {
    type Out = ();
    type Dict = ();
    fn literal(&mut self, _: &[u8]) {}
    fn number(&mut self, _: &[u8], _: bool) {}
    fn string(&mut self, _: &[u8]) {}
    fn list(&mut self, _: Vec<()>) {}
    fn dict(&mut self) {}
    fn entry(&mut self, _: &mut (), _: &[u8], _: ()) {}
    fn end_dict(&mut self, _: ()) {}
}

/// The fields of a record in the common form.
pub(crate) struct Head<'a, T> {
    pub(crate) key: &'a str,
    /// The text of the `time_ms` number.
    pub(crate) time_ms: &'a [u8],
    pub(crate) value: T,
    pub(crate) metadata: T,
}

/// The key of a record in the common form; `body` is the text after the token, stripped.
pub(crate) fn head_key(body: &[u8]) -> Option<&str> {
    head(body, &mut Skip).map(|h| h.key)
}

/// The shape of a record in the common form: its text cut at its numbers. A text that is the
/// same but for its numbers (each of JSON's grammar) is a record in the common form too, with
/// the same key: the walk reads a number wherever it reads a value, and the bytes around it
/// stay what the walk accepted. A log repeats a few shapes (a metric logged at every step), so
/// most records are checked by comparing a few runs of bytes instead of walking them.
pub(crate) struct Shape {
    /// The text between the numbers: one more part than numbers.
    parts: Vec<Box<[u8]>>,
}

impl Shape {
    /// Whether `body` is this shape's text with other numbers.
    pub(crate) fn matches(&self, body: &[u8]) -> bool {
        let Some((last, parts)) = self.parts.split_last() else {
            return false;
        };
        let mut rest = body;
        for part in parts {
            if !starts_with(rest, part) {
                return false;
            }
            let after = &rest[part.len()..];
            let Some((len, _)) = number_len(after) else {
                return false;
            };
            rest = &after[len..];
        }
        rest == &last[..]
    }
}

/// Whether `b` starts with `part`. Most of a shape's parts are a few bytes (`, "step": `),
/// for which a call to `memcmp` costs more than the comparison.
fn starts_with(b: &[u8], part: &[u8]) -> bool {
    let Some(b) = b.get(..part.len()) else {
        return false;
    };
    let word =
        |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap_or_default());
    match part.len() {
        0..8 => b.iter().zip(part).all(|(x, y)| x == y),
        // Two words that overlap in the middle cover it.
        8..=16 => {
            let last = part.len() - 8;
            word(b, 0) == word(part, 0) && word(b, last) == word(part, last)
        }
        _ => b == part,
    }
}

/// [`head_key`], and the record's [`Shape`].
pub(crate) fn head_shape(body: &[u8]) -> Option<(&str, Shape)> {
    let (head, numbers) = walk_head(body, &mut Skip, true)?;
    let mut parts = Vec::with_capacity(numbers.len() + 1);
    let mut at = 0;
    for (start, end) in numbers {
        parts.push(body[at..start].into());
        at = end;
    }
    parts.push(body[at..].into());
    Some((head.key, Shape { parts }))
}

/// The fields of a record in the common form, its values made by `make`; `None` for anything
/// else.
pub(crate) fn head<'a, M: Make>(body: &'a [u8], make: &mut M) -> Option<Head<'a, M::Out>> {
    walk_head(body, make, false).map(|(head, _)| head)
}

/// Byte ranges in a record's text.
type Spans = Vec<(usize, usize)>;

/// [`head`], and where its numbers are when `note` asks.
fn walk_head<'a, M: Make>(
    body: &'a [u8],
    make: &mut M,
    note: bool,
) -> Option<(Head<'a, M::Out>, Spans)> {
    // Two passes over the whole record, each a few bytes per instruction, spare the walk a
    // test per byte of every string: no byte outside printable ASCII (a tab between tokens,
    // legal JSON, is rare enough to leave to the slow path), no escape.
    if !printable(body) || memchr::memchr(b'\\', body).is_some() {
        return None;
    }
    let mut w = Walk {
        b: body,
        i: 0,
        numbers: note.then(Vec::new),
    };
    w.ws();
    let (mut key, mut time_ms, mut value, mut metadata) = (None, None, None, None);
    w.members(|w, name| {
        match name {
            b"key" => {
                if key.is_some() {
                    return None;
                }
                // ASCII, as checked above: valid UTF-8.
                key = Some(std::str::from_utf8(w.string()?).ok()?);
            }
            b"time_ms" => {
                let start = w.i;
                if time_ms.is_some() || !matches!(w.peek()?, b'-' | b'0'..=b'9') {
                    return None;
                }
                w.number()?;
                time_ms = Some(&body[start..w.i]);
            }
            b"value" | b"metadata" => {
                let slot = if name == b"value" {
                    &mut value
                } else {
                    &mut metadata
                };
                if slot.is_some() {
                    return None;
                }
                *slot = Some(w.value(0, make)?);
            }
            _ => w.value(0, &mut Skip)?,
        }
        Some(())
    })?;
    w.ws();
    if w.i != body.len() {
        return None;
    }
    let head = Head {
        key: key?,
        time_ms: time_ms?,
        value: value?,
        metadata: metadata?,
    };
    Some((head, w.numbers.unwrap_or_default()))
}

/// Every byte in `' '..='~'`; written without an early exit, so that it is vectorised.
fn printable(b: &[u8]) -> bool {
    b.iter().fold(0u8, |bad, &c| {
        bad | u8::from(c.wrapping_sub(b' ') > b'~' - b' ')
    }) == 0
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The first byte of `b` that `found` holds for, eight bytes at a time: `flags` sets the high
/// bit of (at least) the first such byte of a word, little-endian, and of none before it. A
/// record's strings and numbers are mostly a few bytes to a couple of dozen long: too short for
/// memchr's vector search to repay setting it up, and too many for a byte-by-byte loop.
fn first(b: &[u8], flags: impl Fn(u64) -> u64, found: impl Fn(u8) -> bool) -> Option<usize> {
    let mut words = b.chunks_exact(8);
    for (n, word) in words.by_ref().enumerate() {
        let Ok(word) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let flagged = flags(u64::from_le_bytes(word)) & HIGH;
        if flagged != 0 {
            return Some(n * 8 + (flagged.trailing_zeros() / 8) as usize);
        }
    }
    let done = b.len() - words.remainder().len();
    let tail = words.remainder().iter().position(|&c| found(c));
    tail.map(|n| done + n)
}

/// Where the first `"` of `b` is.
fn quote(b: &[u8]) -> Option<usize> {
    first(
        b,
        |word| {
            // The bytes equal to `"` become zero; the lowest byte flagged by the zero-byte
            // test is the first zero (a false flag can only follow a true one).
            let v = word ^ (ONES * u64::from(b'"'));
            v.wrapping_sub(ONES) & !v
        },
        |c| c == b'"',
    )
}

/// How many ASCII digits `b` starts with, eight bytes at a time. Numbers are most of what a
/// record of a shape seen before is checked for, and most are a dozen digits or more (times,
/// floats), so this is the hottest loop of a large log's scan.
fn digits(b: &[u8]) -> usize {
    let mut n = 0;
    while let Some(word) = b.get(n..n + 8) {
        let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // Adding 0x50 sets a byte's high bit when it is at least `0`, adding 0x46 when it is
        // above `9`: a digit is flagged by neither (the first sum's bit negated), any other
        // byte by one of them. Bytes before the first flagged one are digits, so no sum
        // carries into it (a false flag can only follow a true one).
        let flagged = (!word.wrapping_add(ONES * 0x50) | word.wrapping_add(ONES * 0x46)) & HIGH;
        if flagged != 0 {
            return n + (flagged.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + b[n..].iter().take_while(|c| c.is_ascii_digit()).count()
}

/// The length of the number of JSON's grammar that `b` starts with,
/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, and whether it has a fraction or an
/// exponent. A function of a slice rather than a method of the walk, so that it is inlined
/// into a shape's comparison, where most of a large log's numbers are read.
#[inline]
fn number_len(b: &[u8]) -> Option<(usize, bool)> {
    let mut i = usize::from(b.first() == Some(&b'-'));
    let n = digits(&b[i..]);
    if n == 0 || (b[i] == b'0' && n > 1) {
        return None;
    }
    i += n;
    let mut float = false;
    if b.get(i) == Some(&b'.') {
        let n = digits(&b[i + 1..]);
        if n == 0 {
            return None;
        }
        i += 1 + n;
        float = true;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let n = digits(&b[i..]);
        if n == 0 {
            return None;
        }
        i += n;
        float = true;
    }
    Some((i, float))
}

struct Walk<'a> {
    b: &'a [u8],
    i: usize,
    /// Where the numbers read are noted, for a [`Shape`].
    numbers: Option<Spans>,
}

impl<'a> Walk<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// JSON's whitespace, which is all `json.loads` skips.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// A string (the record has no escapes and only printable ASCII, see `head_key`); the
    /// text between the quotes.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let rest = &self.b[start..];
        let len = quote(rest)?;
        self.i = start + len + 1;
        Some(&rest[..len])
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; whether it has a fraction or an
    /// exponent.
    fn number(&mut self) -> Option<bool> {
        let start = self.i;
        let float = self.number_text()?;
        if let Some(numbers) = &mut self.numbers {
            numbers.push((start, self.i));
        }
        Some(float)
    }

    fn number_text(&mut self) -> Option<bool> {
        let (len, float) = number_len(&self.b[self.i..])?;
        self.i += len;
        Some(float)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// An object's members, each name handed to `member`, which reads the value.
    fn members(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.ws();
            let name = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            member(self, name)?;
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// Any JSON value of the forms above.
    fn value<M: Make>(&mut self, depth: usize, make: &mut M) -> Option<M::Out> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|s| make.string(s)),
            b'{' => {
                let mut dict = make.dict();
                self.members(|w, key| {
                    let value = w.value(depth + 1, make)?;
                    make.entry(&mut dict, key, value);
                    Some(())
                })?;
                Some(make.end_dict(dict))
            }
            b'[' => {
                self.i += 1;
                self.ws();
                let mut items = Vec::new();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(make.list(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1, make)?);
                    self.ws();
                    match self.next()? {
                        b',' => continue,
                        b']' => return Some(make.list(items)),
                        _ => return None,
                    }
                }
            }
            c @ (b't' | b'f' | b'n') => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                self.literal(word)?;
                Some(make.literal(word))
            }
            _ => {
                let start = self.i;
                let float = self.number()?;
                Some(make.number(&self.b[start..self.i], float))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{digits, head_key, head_shape, number_len, quote, starts_with};

    #[test]
    fn counts_the_leading_digits_at_any_length() {
        for len in 0..40 {
            for stop in [b'/', b':', b'.', b'e', b' ', b'~', b'"', 0x80, 0xba, 0xff] {
                let mut b: Vec<u8> = (0..len).map(|i| b'0' + (i % 10) as u8).collect();
                assert_eq!(digits(&b), len);
                b.push(stop);
                b.extend_from_slice(b"12345678");
                assert_eq!(digits(&b), len, "{len} {}", stop as char);
            }
        }
    }

    /// JSON's number grammar read one byte at a time: the length of the longest number `b`
    /// starts with as the walk reads it (greedy, then valid or not), and whether it is a float.
    fn number_by_bytes(b: &[u8]) -> Option<(usize, bool)> {
        let run = |from: usize| b[from..].iter().take_while(|c| c.is_ascii_digit()).count();
        let mut i = usize::from(b.first() == Some(&b'-'));
        let int = run(i);
        if int == 0 || (b[i] == b'0' && int > 1) {
            return None;
        }
        i += int;
        let mut float = false;
        if b.get(i) == Some(&b'.') {
            let frac = run(i + 1);
            if frac == 0 {
                return None;
            }
            i += 1 + frac;
            float = true;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let exp = run(i);
            if exp == 0 {
                return None;
            }
            i += exp;
            float = true;
        }
        Some((i, float))
    }

    #[test]
    fn reads_a_number_as_its_grammar_does() {
        // Every string of up to five of these bytes, then the same with long digit runs.
        let alphabet = b"-0123.eE+x";
        let mut cases: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..5 {
            let longer: Vec<Vec<u8>> = cases
                .iter()
                .filter(|c| c.len() == cases.last().map_or(0, Vec::len))
                .flat_map(|c| {
                    alphabet.iter().map(move |&b| {
                        let mut c = c.clone();
                        c.push(b);
                        c
                    })
                })
                .collect();
            cases.extend(longer);
        }
        for case in &cases {
            let long: Vec<u8> = case
                .iter()
                .flat_map(|&b| match b {
                    b'1' => b"1234567890123".to_vec(),
                    b => vec![b],
                })
                .collect();
            for b in [case, &long] {
                assert_eq!(
                    number_len(b),
                    number_by_bytes(b),
                    "{:?}",
                    String::from_utf8_lossy(b)
                );
            }
        }
    }

    #[test]
    fn compares_a_prefix_of_any_length() {
        let text: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for len in 0..=text.len() {
            let part = &text[..len];
            assert!(starts_with(&text, part), "{len}");
            assert!(!starts_with(&text[..len.saturating_sub(1)], part) || len == 0);
            for at in 0..len {
                let mut other = part.to_vec();
                other[at] ^= 0x20;
                assert!(!starts_with(&text, &other), "{len} {at}");
            }
        }
    }

    #[test]
    fn finds_the_first_quote_at_any_place_in_a_word() {
        for len in 0..40 {
            let mut b = vec![b'a'; len];
            assert_eq!(quote(&b), None);
            for at in 0..len {
                b[at] = b'"';
                // A second quote after the first, and bytes just above and below `"`.
                let mut with = b.clone();
                if at + 1 < len {
                    with[at + 1] = b'"';
                }
                if at > 0 {
                    with[at - 1] = b'#';
                }
                assert_eq!(quote(&b), Some(at), "{len} {at}");
                assert_eq!(quote(&with), Some(at), "{len} {at}");
                b[at] = b'!';
            }
        }
    }

    #[test]
    fn reads_the_key_of_the_common_form() {
        let ok = br#"{"namespace": "", "time_ms": 1.5e3, "event_type": "POINT_IN_TIME", "key": "seed", "value": {"a": [1, -2.0, true, false, null, "x", {}, []]}, "metadata": {"file": "f.py", "lineno": 3}}  "#;
        assert_eq!(head_key(ok), Some("seed"));
        assert_eq!(
            head_key(br#" {"key":"a","value":1,"time_ms":-0,"metadata":{}}"#),
            Some("a")
        );
    }

    #[test]
    fn leaves_everything_else_to_the_official_parser() {
        for body in [
            // Missing fields, a field twice, a key or time of another type.
            &br#"{"key": "a", "value": 1, "time_ms": 5}"#[..],
            br#"{"key": "a", "key": "b", "value": 1, "time_ms": 5, "metadata": {}}"#,
            br#"{"key": 7, "value": 1, "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": 1, "time_ms": "5", "metadata": {}}"#,
            br#"{"key": "a", "value": 1, "value": 2, "time_ms": 5, "metadata": {}}"#,
            // Escapes, Python's non-standard numbers, non-ASCII bytes, control characters.
            br#"{"key": "a\"b", "value": 1, "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": "\u00e9", "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": NaN, "time_ms": 5, "metadata": {}}"#,
            "{\"key\": \"a\", \"value\": \"\u{e9}\", \"time_ms\": 5, \"metadata\": {}}".as_bytes(),
            b"{\"key\": \"a\", \"value\": \"\t\", \"time_ms\": 5, \"metadata\": {}}",
            // Malformed JSON: numbers, literals, separators, trailing text.
            br#"{"key": "a", "value": 01, "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": 1., "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": 1e, "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": tru, "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": [1,], "time_ms": 5, "metadata": {}}"#,
            br#"{"key": "a", "value": 1, "time_ms": 5, "metadata": {},}"#,
            br#"{"key": "a", "value": 1, "time_ms": 5, "metadata": {}} x"#,
            br#"{"key": "a", "value": 1, "time_ms": 5, "metadata": {}"#,
            b"",
            b"null",
        ] {
            assert_eq!(head_key(body), None, "{}", String::from_utf8_lossy(body));
        }
        let deep = format!(
            r#"{{"key": "a", "value": {}1{}, "time_ms": 5, "metadata": {{}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(head_key(deep.as_bytes()), None);
    }

    #[test]
    fn a_shape_matches_its_record_with_any_numbers_and_nothing_else() {
        let template = br#"{"namespace": "", "time_ms": 1745, "key": "tracked_stats", "value": {"loss": 0.25, "steps": [1, -2, 3e5]}, "metadata": {"file": "f.py", "lineno": 3}}"#;
        let (key, shape) = head_shape(template).unwrap();
        assert_eq!(key, "tracked_stats");
        let text = String::from_utf8(template.to_vec()).unwrap();
        let with = |from: &str, to: &str| text.replacen(from, to, 1);
        // Every number replaced by any number of JSON's grammar: the same shape.
        for number in [
            "0",
            "-0",
            "7",
            "-12",
            "1.5",
            "-0.0",
            "2e9",
            "2E-9",
            "1.25e+3",
            "123456789012345678901234567890",
        ] {
            for from in ["1745", "0.25", "-2", "3e5", "3}}"] {
                let to = if from == "3}}" {
                    format!("{number}}}}}")
                } else {
                    number.to_string()
                };
                let changed = with(from, &to);
                assert!(shape.matches(changed.as_bytes()), "{changed}");
                assert_eq!(head_key(changed.as_bytes()), Some("tracked_stats"));
            }
        }
        // Anything else: not the shape, whether or not it is a record in the common form.
        for (from, to) in [
            ("1745", "01745"),
            ("1745", "1745."),
            ("0.25", ".25"),
            ("0.25", "0.25e"),
            ("0.25", "- 1"),
            ("0.25", "0.2 5"),
            ("0.25", "NaN"),
            ("0.25", "true"),
            ("0.25", "\"0.25\""),
            ("-2", "-"),
            ("-2", "--2"),
            ("3e5", "3e+"),
            ("f.py", "g.py"),
            ("tracked_stats", "other_stats"),
            ("\"lineno\": 3", "\"lineno\": 3, \"x\": 4"),
            ("}}", "} }"),
            ("}}", "}}}"),
            ("{\"namespace", " {\"namespace"),
        ] {
            let changed = with(from, to);
            assert_ne!(changed, text, "{from}");
            assert!(!shape.matches(changed.as_bytes()), "{changed}");
        }
        assert!(!shape.matches(b""));
        assert!(!shape.matches(&template[..template.len() - 1]));
    }

    #[test]
    fn what_a_shape_matches_the_walk_reads_with_the_same_key() {
        // Every record made from these by changing one byte to one of a few others: where the
        // shape matches it, the walk reads it, with the template's key.
        let templates: [&[u8]; 3] = [
            br#"{"key": "a", "value": 12, "time_ms": 5, "metadata": {"n": [1.5, 2]}}"#,
            br#"{"time_ms": -1.0e3, "key": "b", "value": {"x": 0}, "metadata": {}}"#,
            br#" {"key":"c","value":[0,-0.5,7E+2],"time_ms":90,"metadata":{"s":"t"}} "#,
        ];
        for template in templates {
            let (key, shape) = head_shape(template).unwrap();
            for at in 0..template.len() {
                for byte in *b"0159.-+eE \"x,}]" {
                    let mut changed = template.to_vec();
                    changed[at] = byte;
                    for text in [changed.clone(), {
                        changed.insert(at, byte);
                        changed
                    }] {
                        if shape.matches(&text) {
                            assert_eq!(
                                head_key(&text),
                                Some(key),
                                "{}",
                                String::from_utf8_lossy(&text)
                            );
                        }
                    }
                }
            }
        }
    }
}
