//! The lines of a log that hold the record token, as the official parser finds them (it splits
//! the Latin-1 text on universal newlines and looks for the token's last occurrence in each
//! line), found by searching the token across the whole log instead: most lines of a large log
//! hold no token, and skipping them costs a count of their line breaks rather than a search
//! each.

use memchr::memmem::Finder;

/// The lines holding `finder`'s token: `(physical line number from 1, the line from the
/// token's first occurrence to its end)`; [`from_last_token`] gives the part of it the
/// official parser reads.
pub(crate) fn token_lines<'a>(bytes: &'a [u8], finder: &'a Finder<'a>) -> TokenLines<'a> {
    TokenLines {
        bytes,
        finder,
        pos: 0,
        breaks: 0,
    }
}

/// The iterator of [`token_lines`].
pub(crate) struct TokenLines<'a> {
    bytes: &'a [u8],
    finder: &'a Finder<'a>,
    pos: usize,
    /// Line breaks before `pos`.
    breaks: usize,
}

impl TokenLines<'_> {
    /// The line breaks of the whole text, once the iterator has run to its end.
    pub(crate) fn breaks_to_end(&self) -> usize {
        self.breaks + count_breaks(&self.bytes[self.pos..])
    }
}

impl<'a> Iterator for TokenLines<'a> {
    type Item = (usize, &'a [u8]);

    fn next(&mut self) -> Option<(usize, &'a [u8])> {
        let (bytes, pos) = (self.bytes, self.pos);
        let first = pos + self.finder.find(&bytes[pos..])?;
        self.breaks += count_breaks(&bytes[pos..first]);
        let rest = &bytes[first..];
        let (len, adv) = match memchr::memchr2(b'\n', b'\r', rest) {
            Some(i) if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') => (i, i + 2),
            Some(i) => (i, i + 1),
            None => (rest.len(), rest.len()),
        };
        self.pos = first + adv;
        let phys = self.breaks + 1;
        if adv > len {
            self.breaks += 1;
        }
        Some((phys, &rest[..len]))
    }
}

/// `line`, which starts with `finder`'s token, from the token's last occurrence: a search the
/// caller makes only where it needs to (a record of a shape seen before holds no second token).
pub(crate) fn from_last_token<'a>(line: &'a [u8], finder: &Finder<'_>) -> &'a [u8] {
    let mut at = 0;
    while let Some(next) = line.get(at + 1..).and_then(|rest| finder.find(rest)) {
        at += 1 + next;
    }
    &line[at..]
}

/// Universal newlines in `text`: `\n`, `\r\n` and a lone `\r` each end one line.
fn count_breaks(text: &[u8]) -> usize {
    // Most logs have no `\r`: then the breaks are the `\n`s, counted rather than visited one
    // by one. Counted in byte-wide sums over pieces short enough not to overflow one, a loop
    // the compiler vectorises.
    if memchr::memchr(b'\r', text).is_none() {
        return text
            .chunks(255)
            .map(|piece| {
                piece
                    .iter()
                    .fold(0u8, |n, &c| n.wrapping_add(u8::from(c == b'\n')))
            })
            .map(usize::from)
            .sum();
    }
    memchr::memchr2_iter(b'\n', b'\r', text)
        .filter(|&i| !(text[i] == b'\r' && text.get(i + 1) == Some(&b'\n')))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lines_as_universal_newlines_do() {
        let finder = Finder::new(":::MLLOG ");
        let log = b"a\r\nb :::MLLOG 1 :::MLLOG 2\rc\n\n:::MLLOG 3\r\n\r\r\nx:::MLLOG 4";
        assert_eq!(
            token_lines(log, &finder).next(),
            Some((2, &b":::MLLOG 1 :::MLLOG 2"[..]))
        );
        let got: Vec<(usize, &[u8])> = token_lines(log, &finder)
            .map(|(phys, line)| (phys, from_last_token(line, &finder)))
            .collect();
        assert_eq!(
            got,
            [
                (2, &b":::MLLOG 2"[..]),
                (5, b":::MLLOG 3"),
                (8, b":::MLLOG 4")
            ]
        );
        // The same numbers as splitting every line.
        let text = String::from_utf8_lossy(log)
            .replace("\r\n", "\n")
            .replace('\r', "\n");
        let by_line: Vec<usize> = text
            .split('\n')
            .enumerate()
            .filter(|(_, l)| l.contains(":::MLLOG "))
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(by_line, [2, 5, 8]);
        assert_eq!(token_lines(b"", &finder).count(), 0);
        let mut none = token_lines(b"no token\n\r\n\r", &finder);
        assert_eq!(none.next(), None);
        assert_eq!(none.breaks_to_end(), 3);
        let mut all = token_lines(log, &finder);
        all.by_ref().count();
        assert_eq!(all.breaks_to_end(), 7, "the last line has no break");
        // A log with no `\r`, counted the fast way.
        let unix = b"a\nb\n\n:::MLLOG 1\nc\n:::MLLOG 2\nd\n";
        let mut lines = token_lines(unix, &finder);
        assert_eq!(lines.next(), Some((4, &b":::MLLOG 1"[..])));
        assert_eq!(lines.next(), Some((6, &b":::MLLOG 2"[..])));
        assert_eq!(lines.next(), None);
        assert_eq!(lines.breaks_to_end(), 7);
    }
}
