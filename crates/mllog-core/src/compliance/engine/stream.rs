//! The log read as a stream: in pieces of whole lines through a buffer that holds the longest
//! line at most, never the whole log; the text of a record that a later rule file reads is
//! read again from its place in the file.

use std::borrow::Cow;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use super::log::Scan;

/// How much of the log is read at a time.
const PIECE: usize = 1 << 16;

/// Where the records' text can be read again.
pub(crate) enum LogText<'a> {
    /// A log held in memory.
    Bytes(&'a [u8]),
    /// A log file, read again at a record's place.
    File(&'a File),
}

impl LogText<'_> {
    /// The bytes `span` of the log.
    pub(crate) fn read(&self, span: (usize, usize)) -> std::io::Result<Cow<'_, [u8]>> {
        match self {
            LogText::Bytes(b) => Ok(Cow::Borrowed(&b[span.0..span.1])),
            &LogText::File(mut f) => {
                let mut buf = vec![0; span.1 - span.0];
                f.seek(SeekFrom::Start(span.0 as u64))?;
                f.read_exact(&mut buf)?;
                Ok(Cow::Owned(buf))
            }
        }
    }
}

/// Feeds the whole of `r` to `scan`, whole lines at a time, until its end or until the
/// official parser raises.
pub(crate) fn scan_reader(mut r: impl Read, scan: &mut Scan) -> std::io::Result<()> {
    let mut buf = vec![0; PIECE];
    let (mut len, mut offset) = (0, 0);
    loop {
        if len == buf.len() {
            // A line longer than the buffer: the buffer grows to hold it.
            buf.resize(buf.len() * 2, 0);
        }
        let n = match r.read(&mut buf[len..]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n;
        let eof = n == 0;
        let cut = if eof { len } else { whole_lines(&buf[..len]) };
        if cut > 0 && !scan.feed(&buf[..cut], offset) {
            return Ok(());
        }
        buf.copy_within(cut..len, 0);
        len -= cut;
        offset += cut;
        if eof {
            return Ok(());
        }
    }
}

/// The length of the whole lines at the start of `data`: up to its last line break, where a
/// `\r` as the very last byte does not count (it may be the first half of `\r\n`).
fn whole_lines(data: &[u8]) -> usize {
    let mut end = data.len();
    while let Some(p) = memchr::memrchr2(b'\n', b'\r', &data[..end]) {
        if data[p] == b'\r' && p + 1 == data.len() {
            end = p;
            continue;
        }
        return p + 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compliance::engine::log::{parse, LogFormat};

    /// A reader handing out `n` bytes at a time, as a pipe may.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_log_read_in_pieces_is_the_log_read_whole() {
        let rec = |k: &str| {
            format!(
                ":::MLLOG {{\"key\": \"{k}\", \"value\": 1, \"time_ms\": 5, \"metadata\": {{}}}}"
            )
        };
        let log = format!(
            "noise\r\n{}\r{}\r\n\r\n:::MLLOG {{bad\n{}\nx {}",
            rec("a"),
            rec("b"),
            rec("c"),
            rec("d")
        );
        let whole = parse(log.as_bytes(), LogFormat::JsonDataclass);
        for step in [1, 2, 3, 7, 64, log.len()] {
            let mut scan = Scan::new(LogFormat::JsonDataclass, &|_| false);
            scan_reader(Trickle(log.as_bytes(), step), &mut scan).unwrap();
            let got = scan.finish();
            let places = |p: &crate::compliance::engine::log::Parsed| {
                p.records
                    .iter()
                    .map(|r| (r.phys, r.lineno, r.span, r.key))
                    .collect::<Vec<_>>()
            };
            assert_eq!(places(&got), places(&whole), "{step} bytes at a time");
            assert_eq!(got.errors.len(), 1);
            assert_eq!(got.errors[0].phys, 5);
        }
        assert_eq!(whole.records.len(), 4);
        assert_eq!(
            whole.records.iter().map(|r| r.phys).collect::<Vec<_>>(),
            [2, 3, 6, 7]
        );
        assert_eq!(whole_lines(b"a\r"), 0);
        assert_eq!(whole_lines(b"a\rb\r"), 2);
        assert_eq!(whole_lines(b"a\nb"), 2);
    }
}
