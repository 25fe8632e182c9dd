//! Live updates without the compiler: new values for constants of the bundle's pipeline, applied
//! through the plan's live-update record (`pipec_update_constants`, docs/plan.md "Live updates").

use std::ffi::CString;
use std::ptr;

use crate::error::{c_string, check, text};
use crate::{sys, Error, ErrorKind, Pipeline, Result};

/// A constant's value, as `-D NAME=VALUE` writes one: the kind matters (`3 / 2` is 1, `3.0 / 2` 1.5).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    /// An integer past `i64::MAX`.
    UInt(u64),
    Float(f64),
    Bool(bool),
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Float(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}

impl Value {
    fn raw(self) -> sys::pipec_value {
        let (kind, as_) = match self {
            Value::Int(i) => (sys::PIPEC_VALUE_INT, sys::pipec_value_as { i }),
            Value::UInt(u) => (sys::PIPEC_VALUE_UINT, sys::pipec_value_as { u }),
            Value::Float(f) => (sys::PIPEC_VALUE_FLOAT, sys::pipec_value_as { f }),
            Value::Bool(b) => (sys::PIPEC_VALUE_BOOL, sys::pipec_value_as { b: b as i32 }),
        };
        sys::pipec_value { kind, as_ }
    }

    fn from_raw(raw: &sys::pipec_value) -> Option<Value> {
        // the union member the kind names is the one the library wrote
        unsafe {
            match raw.kind {
                sys::PIPEC_VALUE_INT => Some(Value::Int(raw.as_.i)),
                sys::PIPEC_VALUE_UINT => Some(Value::UInt(raw.as_.u)),
                sys::PIPEC_VALUE_FLOAT => Some(Value::Float(raw.as_.f)),
                sys::PIPEC_VALUE_BOOL => Some(Value::Bool(raw.as_.b != 0)),
                _ => None,
            }
        }
    }
}

/// A constant of the bundle's main file: its value now, and why it cannot change in place
/// (`None` when it can): its first structural use, "reaches a buffer's dimension at FILE:L:C".
#[derive(Clone, Debug, PartialEq)]
pub struct Constant {
    pub value: Value,
    pub structural: Option<String>,
}

impl Pipeline {
    /// New values for constants, all or nothing: the kernel nodes' scalar arguments and launch
    /// shapes they reach change for the replays enqueued from now on. Returns the count of kernel
    /// nodes changed. An unknown name is `InvalidArgument`; a constant that cannot change in
    /// place, or a value the program cannot take, `UpdateRefused`, one line saying why.
    pub fn update_constants(&mut self, values: &[(&str, Value)]) -> Result<usize> {
        let names = values
            .iter()
            .map(|(name, _)| c_string("the constant's name", name.as_bytes()))
            .collect::<Result<Vec<CString>>>()?;
        let pointers: Vec<*const std::os::raw::c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let raw: Vec<sys::pipec_value> = values.iter().map(|(_, v)| v.raw()).collect();
        let mut changed = 0;
        check(unsafe {
            sys::pipec_update_constants(self.ptr(), pointers.as_ptr(), raw.as_ptr(), raw.len(), &mut changed)
        })?;
        Ok(changed)
    }

    /// A constant of the main file: its value now, and whether it can change in place.
    pub fn constant(&self, name: &str) -> Result<Constant> {
        let name = c_string("the constant's name", name.as_bytes())?;
        let mut raw = sys::pipec_value { kind: sys::PIPEC_VALUE_INT, as_: sys::pipec_value_as { i: 0 } };
        let mut structural = ptr::null();
        check(unsafe { sys::pipec_constant(self.ptr(), name.as_ptr(), &mut raw, &mut structural) })?;
        let value = Value::from_raw(&raw).ok_or_else(|| Error {
            kind: ErrorKind::Unsupported,
            message: format!(
                "`{}` has a value of kind {}, which this crate does not know",
                name.to_string_lossy(),
                raw.kind
            ),
        })?;
        let structural = if structural.is_null() { None } else { Some(unsafe { text(structural) }) };
        Ok(Constant { value, structural })
    }
}
