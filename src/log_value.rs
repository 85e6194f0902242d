//! What [`mllog!`](crate::mllog) accepts as a value or a metadata field, and how a value that
//! `tracing` has no type for (a list, a tuple, an object, `None`) reaches the layer.
//!
//! `tracing::Value` is sealed: a field is a number, a bool, a string, an error, or something
//! `Debug`. Numbers, booleans and strings keep their typed path (no formatting at all); an
//! `f32` travels as the `f64` of its shortest decimal (`0.1f32` as `0.1`). Everything else
//! travels as [`Composite`], a `Debug` wrapper: when the MLLOG layer formats it, it hands the
//! layer its [`Value`] through a thread-local slot instead of writing text, so nothing is
//! parsed back; any other layer (`fmt`, OpenTelemetry) sees its JSON text.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use tracing::field::DebugValue;

use crate::record::{f32_shortest, Value};

/// A type [`mllog!`](crate::mllog) logs as an MLLOG value, as Python's `mlperf_logging` would
/// log the corresponding Python value.
///
/// Implemented for integers (up to 128 bits, logged exactly), `f64`, `f32` (its shortest
/// decimal), `bool`, strings, `Option` (`None` is `null`), slices, arrays, `Vec`, `VecDeque`
/// and tuples (lists), `BTreeMap` with string keys (objects), [`Value`], `serde_json::Value`
/// (feature `serde_json`), and references to any of them, nested freely.
///
/// Implement it for a type of your own through [`Composite`]:
///
/// ```
/// use tracing_mllog::{mllog, Composite, LogValue, Output, Value};
///
/// struct Betas(f64, f64);
///
/// impl LogValue for Betas {
///     type Field<'a> = tracing::field::DebugValue<Composite<'a, Self>>;
///     fn log_field(&self) -> Self::Field<'_> {
///         Composite::field(self)
///     }
///     fn to_value(&self) -> Value {
///         Value::Array(vec![self.0.into(), self.1.into()])
///     }
/// }
///
/// # use tracing_subscriber::prelude::*;
/// # let (sink, records) = tracing_mllog::sink::MemorySink::new();
/// # let (layer, mut guard) = tracing_mllog::MllogLayer::builder()
/// #     .output(Output::Nowhere)
/// #     .sink(sink)
/// #     .build()
/// #     .unwrap();
/// # tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
/// mllog!("opt_adam_betas", Betas(0.9, 0.95), shape = (4, "x"), skip = None::<u32>);
/// # });
/// # guard.shutdown();
/// let line = &records.lines()[0];
/// assert!(line.contains(r#""value": [0.9, 0.95]"#), "{line}");
/// assert!(line.contains(r#""shape": [4, "x"], "skip": null"#), "{line}");
/// ```
///
/// (The hidden lines set up a layer that writes to a [`MemorySink`](crate::sink::MemorySink)
/// whose `records` handle is read here; see [`crate::Builder`].)
pub trait LogValue {
    /// What `mllog!` hands to `tracing` for this value.
    type Field<'a>: tracing::Value
    where
        Self: 'a;

    /// The field `mllog!` records.
    fn log_field(&self) -> Self::Field<'_>;

    /// The value as an MLLOG [`Value`] (used inside lists and objects).
    fn to_value(&self) -> Value;

    /// [`LogValue::to_value`], building a list in `spare` (an empty `Vec` a recycled record
    /// kept) when there is one: lists override it, so a small list costs no allocation.
    #[doc(hidden)]
    fn to_value_reusing(&self, spare: &mut Option<Vec<Value>>) -> Value {
        let _ = spare;
        self.to_value()
    }
}

/// Makes `v` a field for plain `tracing` macros, as `mllog!` does on its own:
/// `tracing::info!(mllog.key = "k", value = log_value(&vec![1, 2]))` logs `[1, 2]`.
///
/// ```
/// use tracing_mllog::log_value;
/// tracing::info!(mllog.key = "opt_adam_betas", value = log_value(&[0.9, 0.95]));
/// ```
pub fn log_value<T: LogValue + ?Sized>(v: &T) -> T::Field<'_> {
    v.log_field()
}

/// A composite value on its way to the layer: `Debug`, which is the only way `tracing` lets it
/// through. The MLLOG layer receives its [`Value`]; other layers see its JSON text.
///
/// You meet it only when implementing [`LogValue`] for a type of your own that is not a
/// number, a bool or a string: its [`LogValue::log_field`] returns [`Composite::field`] and
/// its [`LogValue::to_value`] builds the [`Value`] (see the [`LogValue`] example). The
/// layer never formats or parses text for it, so a list or object costs no JSON round trip.
///
/// Any layer other than the MLLOG one (`fmt`, OpenTelemetry) formats the field with `Debug`
/// and gets the value's JSON text:
///
/// ```
/// use tracing_mllog::{Composite, LogValue, Value};
///
/// struct Shape(u64, u64);
///
/// impl LogValue for Shape {
///     type Field<'a> = tracing::field::DebugValue<Composite<'a, Self>>;
///     fn log_field(&self) -> Self::Field<'_> {
///         Composite::field(self)
///     }
///     fn to_value(&self) -> Value {
///         Value::Array(vec![self.0.into(), self.1.into()])
///     }
/// }
///
/// let field = Shape(4, 1024).log_field();
/// assert_eq!(format!("{field:?}"), "[4, 1024]");
/// ```
pub struct Composite<'a, T: ?Sized>(&'a T);

impl<'a, T: LogValue + ?Sized> Composite<'a, T> {
    /// The field for `v`, for [`LogValue::log_field`].
    pub fn field(v: &'a T) -> DebugValue<Composite<'a, T>> {
        tracing::field::debug(Composite(v))
    }
}

impl<T: LogValue + ?Sized> fmt::Debug for Composite<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = SLOT.with(|slot| {
            if slot.armed.replace(false) {
                slot.full.set(true);
                Some((slot.out.get(), slot.spare.get()))
            } else {
                None
            }
        });
        match target {
            Some((out, spare)) => {
                // SAFETY: armed only inside `debug_value`, whose locals these point to, for the
                // duration of its `write!`; disarmed by the first `Composite` that uses them
                // (above) and by `debug_value` itself when the `write!` ends or unwinds.
                // `out` holds the `Null` it was made with: written over, nothing to drop.
                unsafe { out.write(self.0.to_value_reusing(&mut *spare)) };
                Ok(())
            }
            None => f.write_str(&self.0.to_value().to_json()),
        }
    }
}

/// The hand-over between [`Composite`]'s `Debug` and the layer, on the thread that logs: plain
/// `Copy` cells (no destructor, so no lazy registration on each access).
struct Handover {
    /// Set by the layer just before it formats a field: the next `Composite` formatted on this
    /// thread is for it.
    armed: Cell<bool>,
    full: Cell<bool>,
    /// Where the value goes.
    out: Cell<*mut Value>,
    /// An empty list buffer from the layer's recycled record, for the value's list.
    spare: Cell<*mut Option<Vec<Value>>>,
}

thread_local! {
    static SLOT: Handover = const {
        Handover {
            armed: Cell::new(false),
            full: Cell::new(false),
            out: Cell::new(std::ptr::null_mut()),
            spare: Cell::new(std::ptr::null_mut()),
        }
    };
}

/// Disarms the slot when `debug_value` is done, even by unwinding out of a `Debug` impl.
struct Disarm;

impl Disarm {
    /// Disarms; whether a `Composite` handed its value over.
    fn done(self) -> bool {
        std::mem::forget(self);
        SLOT.with(|slot| {
            slot.armed.set(false);
            slot.full.replace(false)
        })
    }
}

impl Drop for Disarm {
    fn drop(&mut self) {
        SLOT.with(|slot| slot.armed.set(false));
    }
}

/// A `Debug` field as the layer stores it: the [`Value`] of a [`Composite`], or else its
/// `Debug` text as a string. `spare` is an empty list buffer the value's list may take.
///
/// The two are told apart without guessing: only a `Composite` fills the slot, and only a
/// field whose whole output is that hand-over counts (a `Debug` impl that writes text around
/// a `Composite` it holds stays text).
pub(crate) fn debug_value(value: &dyn fmt::Debug, spare: &mut Option<Vec<Value>>) -> Value {
    use fmt::Write;
    let mut out = Value::Null;
    SLOT.with(|slot| {
        slot.full.set(false);
        slot.out.set(&mut out);
        slot.spare.set(spare);
        slot.armed.set(true);
    });
    let mut text = String::new();
    let disarm = Disarm;
    let _ = write!(text, "{value:?}");
    if disarm.done() && text.is_empty() {
        out
    } else {
        Value::Str(text.into())
    }
}

macro_rules! typed {
    ($($t:ty),*) => {$(
        impl LogValue for $t {
            type Field<'a> = $t;
            #[inline]
            fn log_field(&self) -> $t {
                *self
            }
            fn to_value(&self) -> Value {
                Value::from(*self)
            }
        }
    )*};
}
typed!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f64, bool);

impl LogValue for f32 {
    type Field<'a> = f64;
    #[inline]
    fn log_field(&self) -> f64 {
        f32_shortest(*self)
    }
    fn to_value(&self) -> Value {
        Value::Float(f32_shortest(*self))
    }
}

impl LogValue for str {
    type Field<'a> = &'a str;
    #[inline]
    fn log_field(&self) -> &str {
        self
    }
    fn to_value(&self) -> Value {
        Value::Str(self.to_owned().into())
    }
}

impl LogValue for String {
    type Field<'a> = &'a str;
    #[inline]
    fn log_field(&self) -> &str {
        self
    }
    fn to_value(&self) -> Value {
        Value::Str(self.clone().into())
    }
}

impl LogValue for std::borrow::Cow<'_, str> {
    type Field<'a>
        = &'a str
    where
        Self: 'a;
    #[inline]
    fn log_field(&self) -> &str {
        self
    }
    fn to_value(&self) -> Value {
        Value::Str(self.to_string().into())
    }
}

impl<T: LogValue + ?Sized> LogValue for &T {
    type Field<'a>
        = T::Field<'a>
    where
        Self: 'a;
    #[inline]
    fn log_field(&self) -> Self::Field<'_> {
        (**self).log_field()
    }
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
    fn to_value_reusing(&self, spare: &mut Option<Vec<Value>>) -> Value {
        (**self).to_value_reusing(spare)
    }
}

/// Implements `LogValue` as a [`Composite`] with the given `to_value`.
macro_rules! composite {
    ($(impl[$($g:tt)*] $t:ty => |$s:ident| $body:expr;)*) => {$(
        impl<$($g)*> LogValue for $t {
            type Field<'a> = DebugValue<Composite<'a, Self>> where Self: 'a;
            fn log_field(&self) -> Self::Field<'_> {
                Composite::field(self)
            }
            fn to_value(&self) -> Value {
                let $s = self;
                $body
            }
        }
    )*};
}

/// Implements `LogValue` for a sequence: a [`Composite`] list that fills a spare buffer.
macro_rules! list {
    ($(impl[$($g:tt)*] $t:ty;)*) => {$(
        impl<$($g)*> LogValue for $t {
            type Field<'a> = DebugValue<Composite<'a, Self>> where Self: 'a;
            fn log_field(&self) -> Self::Field<'_> {
                Composite::field(self)
            }
            fn to_value(&self) -> Value {
                self.to_value_reusing(&mut None)
            }
            fn to_value_reusing(&self, spare: &mut Option<Vec<Value>>) -> Value {
                let mut items = spare.take().unwrap_or_default();
                items.extend(self.iter().map(T::to_value));
                Value::Array(items)
            }
        }
    )*};
}

list! {
    impl[T: LogValue] [T];
    impl[T: LogValue, const N: usize] [T; N];
    impl[T: LogValue] Vec<T>;
    impl[T: LogValue] VecDeque<T>;
}

composite! {
    impl[T: LogValue] Option<T> => |s| s.as_ref().map_or(Value::Null, T::to_value);
    impl[K: AsRef<str>, V: LogValue] BTreeMap<K, V> => |s| Value::Object(
        s.iter().map(|(k, v)| (k.as_ref().to_owned().into(), v.to_value())).collect()
    );
    impl[] Value => |s| s.clone();
}

#[cfg(feature = "serde_json")]
composite! {
    impl[] serde_json::Value => |s| from_json(s);
}

/// A `serde_json::Value` as an MLLOG value: objects keep the map's order (sorted, or insertion
/// order with serde_json's `preserve_order`), numbers keep integer or float.
#[cfg(feature = "serde_json")]
fn from_json(v: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Int(u.into())
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        J::String(s) => Value::Str(s.clone().into()),
        J::Array(items) => Value::Array(items.iter().map(from_json).collect()),
        J::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone().into(), from_json(v)))
                .collect(),
        ),
    }
}

macro_rules! tuples {
    ($(($($n:tt $t:ident),+))*) => {
        composite! {$(
            impl[$($t: LogValue),+] ($($t,)+) => |s| Value::Array(vec![$(s.$n.to_value()),+]);
        )*}
    };
}
tuples! {
    (0 A)
    (0 A, 1 B)
    (0 A, 1 B, 2 C)
    (0 A, 1 B, 2 C, 3 D)
    (0 A, 1 B, 2 C, 3 D, 4 E)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G)
    (0 A, 1 B, 2 C, 3 D, 4 E, 5 F, 6 G, 7 H)
}

/// The macro's plumbing: which path a value takes is decided where the macro is expanded,
/// by method lookup (a `LogValue` first, any other `tracing::Value` unchanged).
#[doc(hidden)]
pub mod __private {
    use super::LogValue;

    /// What `mllog!` puts around each value, so that method lookup picks the path: through
    /// [`ViaLogValue`] (on `Wrap` itself) when the type is a [`LogValue`], else through
    /// [`ViaTracing`] (on `&Wrap`, one auto-reference further) for any other `tracing::Value`.
    ///
    /// ```
    /// use tracing_mllog::__private::{ViaLogValue as _, ViaTracing as _, Wrap};
    ///
    /// let steps = vec![1, 2];
    /// let list = (&Wrap(&steps)).__mllog_field(); // a `LogValue`: a composite field
    /// assert_eq!(format!("{list:?}"), "[1, 2]");
    /// let shown = tracing::field::display("as written");
    /// let other = (&Wrap(&shown)).__mllog_field(); // only a `tracing::Value`: unchanged
    /// assert_eq!(format!("{other:?}"), "as written");
    /// ```
    #[derive(Debug)]
    pub struct Wrap<'a, T: ?Sized>(pub &'a T);

    /// The path of a [`LogValue`]: its [`LogValue::log_field`].
    ///
    /// ```
    /// use tracing_mllog::__private::{ViaLogValue, Wrap};
    ///
    /// let field = Wrap(&None::<u32>).__mllog_field();
    /// assert_eq!(format!("{field:?}"), "null");
    /// ```
    pub trait ViaLogValue<'a> {
        type Out;
        fn __mllog_field(&self) -> Self::Out;
    }

    impl<'a, T: LogValue + ?Sized> ViaLogValue<'a> for Wrap<'a, T> {
        type Out = T::Field<'a>;
        #[inline(always)]
        fn __mllog_field(&self) -> T::Field<'a> {
            self.0.log_field()
        }
    }

    /// Whether a key given as text names `eval_accuracy` (`mllog!` then uses the
    /// [`crate::EVAL_EVENT`] callsite).
    ///
    /// ```
    /// use tracing_mllog::__private::{KeyText as _, OtherKey as _, Wrap};
    ///
    /// assert!((&Wrap(&"eval_accuracy")).__mllog_is_eval());
    /// assert!(!(&Wrap(&String::from("tracked_stats"))).__mllog_is_eval());
    /// assert!(!(&Wrap(&tracing::field::display("eval_accuracy"))).__mllog_is_eval());
    /// ```
    pub trait KeyText {
        fn __mllog_is_eval(&self) -> bool;
    }

    impl<T: AsRef<str> + ?Sized> KeyText for Wrap<'_, T> {
        #[inline(always)]
        fn __mllog_is_eval(&self) -> bool {
            let key = self.0.as_ref().as_bytes();
            // The first byte rules out almost every other key ("tracked_stats" has the length).
            key.first() == Some(&b'e') && key == crate::keys::EVAL_ACCURACY.as_bytes()
        }
    }

    /// A key that is no text (`%x`, `?x`): never `eval_accuracy` at the callsite.
    pub trait OtherKey {
        fn __mllog_is_eval(&self) -> bool;
    }

    impl<T: ?Sized> OtherKey for &Wrap<'_, T> {
        #[inline(always)]
        fn __mllog_is_eval(&self) -> bool {
            false
        }
    }

    /// The path of any other `tracing::Value` (`?x`, `%x`, an error): the value unchanged.
    ///
    /// ```
    /// use tracing_mllog::__private::{ViaTracing, Wrap};
    ///
    /// let shown = tracing::field::display(1.5);
    /// let field = (&Wrap(&shown)).__mllog_field();
    /// assert_eq!(field.to_string(), "1.5");
    /// ```
    pub trait ViaTracing<'a> {
        type Out;
        fn __mllog_field(&self) -> Self::Out;
    }

    impl<'a, T: tracing::Value + ?Sized> ViaTracing<'a> for &Wrap<'a, T> {
        type Out = &'a T;
        #[inline(always)]
        fn __mllog_field(&self) -> &'a T {
            self.0
        }
    }
}
