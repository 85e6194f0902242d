//! The log's records as the run reads them: each record's Python object is built the first time
//! a rule reads the record (a record whose key no rule names is never built), then kept, so
//! that every config sees the one object, changes included, as the checker's list holds one
//! object per line. Once a snippet is handed the whole list (`loglines`), the list is built
//! and is what every later pass reads.

use super::log::{build, LogFormat, Objects, Parsed, NOT_BUILT};
use super::obj::Obj;
use super::stream::LogText;

/// The records of one log.
pub(crate) struct Lines<'a> {
    text: LogText<'a>,
    format: LogFormat,
    parsed: Parsed,
    /// The list handed to snippets, once one asked for it.
    list: Option<Obj>,
    objects: Objects,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: LogText<'a>, format: LogFormat, parsed: Parsed) -> Lines<'a> {
        Lines {
            text,
            format,
            parsed,
            list: None,
            objects: Objects::default(),
        }
    }

    /// Which of the log's distinct keys `wanted` holds for, by key number.
    pub(crate) fn wanted_keys(&self, wanted: impl Fn(&str) -> bool) -> Vec<bool> {
        self.parsed.keys.iter().map(|k| wanted(k)).collect()
    }

    /// How many lines a pass visits.
    pub(crate) fn len(&self) -> usize {
        match &self.list {
            Some(Obj::List(l)) => l.borrow().len(),
            Some(_) => 0,
            None => self.parsed.records.len(),
        }
    }

    fn built(&mut self, i: usize) -> Result<Obj, String> {
        let rec = &self.parsed.records[i];
        if let Some(o) = self.parsed.object(rec) {
            return Ok(o.clone());
        }
        let o = self
            .text
            .read(rec.span)
            .map_err(|e| format!("the log cannot be read again: {e}"))
            .and_then(|line| build(&line, rec, self.format, &mut self.objects))
            .map_err(|e| format!("{e} (the record on line {} of the log)", rec.phys))?;
        self.parsed.keep(i, o.clone());
        Ok(o)
    }

    /// The whole list (`loglines`), every record built.
    pub(crate) fn list(&mut self) -> Result<Obj, String> {
        if let Some(l) = &self.list {
            return Ok(l.clone());
        }
        let all = (0..self.parsed.records.len())
            .map(|i| self.built(i))
            .collect::<Result<Vec<Obj>, String>>()?;
        let list = Obj::list(all);
        self.list = Some(list.clone());
        Ok(list)
    }

    /// The first line at `from` or after it and before `end`, with its position: a record is
    /// read when `wanted` (from [`Lines::wanted_keys`]) holds for its key, or when it was
    /// built already (a snippet may have changed its key). Records skipped are passed over
    /// here, in one loop: most of a large log's records are of keys a rule file has no rule
    /// for.
    pub(crate) fn next(
        &mut self,
        from: usize,
        end: usize,
        wanted: &[bool],
    ) -> Result<Option<(usize, Obj)>, String> {
        if let Some(list) = &self.list {
            let Obj::List(l) = list else {
                return Ok(None);
            };
            let l = l.borrow();
            return Ok(l
                .get(from)
                .filter(|_| from < end)
                .map(|o| (from, o.clone())));
        }
        let end = end.min(self.parsed.records.len());
        let Some(at) = (from..end).find(|&i| {
            let rec = &self.parsed.records[i];
            rec.built != NOT_BUILT || wanted[rec.key as usize]
        }) else {
            return Ok(None);
        };
        self.built(at).map(|o| Some((at, o)))
    }
}
