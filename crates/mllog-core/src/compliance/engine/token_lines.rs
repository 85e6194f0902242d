//! The lines of a log that hold the record token, as the official parser finds them (it splits
//! the Latin-1 text on universal newlines and looks for the token's last occurrence in each
//! line), found by searching the token across the whole log instead: most lines of a large log
//! hold no token, and skipping them costs a count of their line breaks rather than a search
//! each.

use memchr::memmem::Finder;

/// The lines holding `finder`'s token: `(physical line number from 1, the line from the
/// token's last occurrence to its end)`.
pub(crate) fn token_lines<'a>(
    bytes: &'a [u8],
    finder: &'a Finder<'a>,
) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
    let mut pos = 0;
    // Line breaks before `pos`.
    let mut breaks = 0;
    std::iter::from_fn(move || {
        let first = pos + finder.find(&bytes[pos..])?;
        breaks += count_breaks(&bytes[pos..first]);
        let rest = &bytes[first..];
        let (len, adv) = match memchr::memchr2(b'\n', b'\r', rest) {
            Some(i) if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') => (i, i + 2),
            Some(i) => (i, i + 1),
            None => (rest.len(), rest.len()),
        };
        let line = &rest[..len];
        let mut at = 0;
        while let Some(next) = finder.find(&line[at + 1..]) {
            at += 1 + next;
        }
        pos = first + adv;
        breaks += 1;
        Some((breaks, &line[at..]))
    })
}

/// Universal newlines in `text`: `\n`, `\r\n` and a lone `\r` each end one line.
fn count_breaks(text: &[u8]) -> usize {
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
        let got: Vec<(usize, &[u8])> = token_lines(log, &finder).collect();
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
        assert_eq!(token_lines(b"no token\n", &finder).count(), 0);
    }
}
