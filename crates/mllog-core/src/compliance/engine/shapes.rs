//! The shapes of the records a scan has walked (see [`Shape`]), kept so that a record of a
//! shape seen before is read by comparing it with that shape rather than by a walk: a log
//! repeats a few shapes (a metric at every step, an evaluation now and then) thousands of
//! times.

use super::skim::Shape;

/// How many shapes are kept. A log interleaves a few; a record of none of them is walked.
const MAX_SHAPES: usize = 16;

/// The longest record whose shape is kept: a copy of its text is.
pub(crate) const MAX_SHAPE_LEN: usize = 4096;

/// The shapes seen, the most often seen first, each with its record's key number.
#[derive(Default)]
pub(crate) struct Shapes {
    seen: Vec<Seen>,
}

struct Seen {
    shape: Shape,
    key: u32,
    count: u64,
}

impl Shapes {
    /// The key number of the shape `body` has, when one was seen.
    pub(crate) fn find(&mut self, body: &[u8]) -> Option<u32> {
        let at = self.seen.iter().position(|s| s.shape.matches(body))?;
        // The shapes seen most often are tried first, and of those seen as often the one seen
        // last: a shape moves up past those seen as often or less.
        self.seen[at].count += 1;
        let count = self.seen[at].count;
        let to = self.seen[..at]
            .iter()
            .rposition(|s| s.count > count)
            .map_or(0, |i| i + 1);
        self.seen[to..=at].rotate_right(1);
        Some(self.seen[to].key)
    }

    /// Keeps `shape`, the shape of a record whose key number is `key`.
    pub(crate) fn add(&mut self, shape: Shape, key: u32) {
        // The last shape is the one seen least often, and of those the one seen longest ago:
        // it makes room. A new shape goes before the others seen once.
        if self.seen.len() == MAX_SHAPES {
            self.seen.pop();
        }
        let at = self.seen.iter().position(|s| s.count <= 1);
        let new = Seen {
            shape,
            key,
            count: 1,
        };
        self.seen.insert(at.unwrap_or(self.seen.len()), new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compliance::engine::skim::head_shape;

    fn record(name: &str, n: usize) -> String {
        format!(r#"{{"key": "{name}", "value": {n}, "time_ms": {n}, "metadata": {{}}}}"#)
    }

    #[test]
    fn keeps_the_shapes_seen_most_often_and_lets_the_rarest_go() {
        let mut shapes = Shapes::default();
        // One frequent shape, then more rare ones than there is room for.
        let (_, frequent) = head_shape(record("often", 1).as_bytes()).unwrap();
        shapes.add(frequent, 0);
        for n in 0..5 {
            assert_eq!(shapes.find(record("often", n).as_bytes()), Some(0));
        }
        for k in 1..=(MAX_SHAPES as u32 * 2) {
            let text = record(&format!("rare{k}"), 7);
            assert_eq!(shapes.find(text.as_bytes()), None);
            let (_, shape) = head_shape(text.as_bytes()).unwrap();
            shapes.add(shape, k);
            assert_eq!(
                shapes.find(record(&format!("rare{k}"), 8).as_bytes()),
                Some(k)
            );
        }
        assert_eq!(shapes.seen.len(), MAX_SHAPES);
        assert_eq!(shapes.find(record("often", 9).as_bytes()), Some(0));
        assert_eq!(shapes.seen[0].key, 0, "the most often seen is tried first");
        // The latest rare shape is kept, the earliest are gone.
        let last = MAX_SHAPES as u32 * 2;
        assert_eq!(
            shapes.find(record(&format!("rare{last}"), 1).as_bytes()),
            Some(last)
        );
        assert_eq!(shapes.find(record("rare1", 1).as_bytes()), None);
        // Shapes seen once make room in the order they came.
        let mut shapes = Shapes::default();
        for k in 0..=(MAX_SHAPES as u32) {
            let (_, shape) = head_shape(record(&format!("once{k}"), 1).as_bytes()).unwrap();
            shapes.add(shape, k);
        }
        assert_eq!(shapes.find(record("once0", 2).as_bytes()), None);
        for k in 1..=(MAX_SHAPES as u32) {
            assert_eq!(
                shapes.find(record(&format!("once{k}"), 2).as_bytes()),
                Some(k)
            );
        }
    }
}
