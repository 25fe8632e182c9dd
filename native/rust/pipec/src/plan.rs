//! What a host reads from a bundle's plan.json without the C library: the `.pipe` file it came
//! from and its buffers, so that it can type piperun's diagnostics line (an integer buffer's
//! value prints as an integer). A small JSON reader, as the crate has no dependencies.

use crate::{DType, Error, ErrorKind, Result};

/// A JSON value; objects keep their keys in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub fn parse(text: &str) -> Result<Json> {
        let mut reader = Reader { bytes: text.as_bytes(), at: 0 };
        let value = reader.value()?;
        reader.space();
        if reader.at != reader.bytes.len() {
            return Err(reader.error("text after the JSON value"));
        }
        Ok(value)
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        if let Json::String(s) = self {
            Some(s)
        } else {
            None
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        if let Json::Array(items) = self {
            Some(items)
        } else {
            None
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> Error {
        Error { kind: ErrorKind::Bundle, message: format!("plan.json: {what} at byte {}", self.at) }
    }

    fn space(&mut self) {
        while self.bytes.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("an unknown word"))
        }
    }

    fn value(&mut self) -> Result<Json> {
        self.space();
        match self.bytes.get(self.at) {
            None => Err(self.error("the end of the text (truncated?)")),
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(_) => self.number(),
        }
    }

    /// The items of an array or object up to `close`, each read by `item`.
    fn items<T>(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        self.at += 1;
        let mut items = Vec::new();
        self.space();
        if self.bytes.get(self.at) == Some(&close) {
            self.at += 1;
            return Ok(items);
        }
        loop {
            items.push(item(self)?);
            self.space();
            match self.bytes.get(self.at) {
                Some(b',') => self.at += 1,
                Some(&b) if b == close => {
                    self.at += 1;
                    return Ok(items);
                }
                _ => return Err(self.error("a missing `,` or closing bracket")),
            }
        }
    }

    fn array(&mut self) -> Result<Json> {
        self.items(b']', |r| r.value()).map(Json::Array)
    }

    fn object(&mut self) -> Result<Json> {
        self.items(b'}', |r| {
            r.space();
            if r.bytes.get(r.at) != Some(&b'"') {
                return Err(r.error("an object key that is not a string"));
            }
            let key = r.string()?;
            r.space();
            if r.bytes.get(r.at) != Some(&b':') {
                return Err(r.error("a missing `:`"));
            }
            r.at += 1;
            Ok((key, r.value()?))
        })
        .map(Json::Object)
    }

    fn number(&mut self) -> Result<Json> {
        let start = self.at;
        while self.bytes.get(self.at).is_some_and(|b| b"+-.eE0123456789".contains(b)) {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).expect("ASCII digits");
        text.parse().map(Json::Number).map_err(|_| self.error("a malformed number"))
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self.bytes.get(self.at..self.at + 4).ok_or_else(|| self.error("a short \\u escape"))?;
        let value = std::str::from_utf8(digits)
            .ok()
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| self.error("a malformed \\u escape"))?;
        self.at += 4;
        Ok(value)
    }

    fn string(&mut self) -> Result<String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while self.bytes.get(self.at).is_some_and(|&b| b != b'"' && b != b'\\') {
                self.at += 1;
            }
            out.push_str(std::str::from_utf8(&self.bytes[start..self.at]).map_err(|_| self.error("bad UTF-8"))?);
            match self.bytes.get(self.at) {
                None => return Err(self.error("an unterminated string")),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(_) => self.escape(&mut out)?,
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<()> {
        let code = *self.bytes.get(self.at + 1).ok_or_else(|| self.error("an unterminated escape"))?;
        self.at += 2;
        let simple = match code {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let mut unit = self.hex4()?;
                if (0xD800..0xDC00).contains(&unit) && self.bytes[self.at..].starts_with(b"\\u") {
                    self.at += 2;
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (self.hex4()? - 0xDC00);
                }
                char::from_u32(unit).ok_or_else(|| self.error("an escape that is no character"))?
            }
            _ => return Err(self.error("an unknown escape")),
        };
        out.push(simple);
        Ok(())
    }
}

/// A buffer of the plan, as far as a host needs it here.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferSummary {
    pub name: String,
    pub dtype: Option<DType>, // None: a type this crate does not know
    pub mapped: bool,
    pub labels: Vec<String>,
    pub elements: u64,
}

/// The plan's source file and buffers.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanSummary {
    pub pipe: String,
    pub buffers: Vec<BufferSummary>,
}

fn dtype(name: &str) -> Option<DType> {
    let names = [
        ("f32", DType::F32),
        ("f16", DType::F16),
        ("bf16", DType::BF16),
        ("f64", DType::F64),
        ("i32", DType::I32),
        ("u32", DType::U32),
        ("i64", DType::I64),
        ("u64", DType::U64),
        ("u8", DType::U8),
    ];
    names.iter().find(|(n, _)| *n == name).map(|(_, d)| *d)
}

impl PlanSummary {
    pub fn from_json(text: &str) -> Result<PlanSummary> {
        let plan = Json::parse(text)?;
        let missing = |what: &str| Error { kind: ErrorKind::Bundle, message: format!("plan.json has no {what}") };
        let pipe = plan.get("pipe").and_then(Json::as_str).ok_or_else(|| missing("`pipe`"))?.to_string();
        let buffers = plan.get("buffers").and_then(Json::as_array).ok_or_else(|| missing("`buffers`"))?;
        let buffers = buffers
            .iter()
            .map(|b| {
                let text =
                    |key: &str| b.get(key).and_then(Json::as_str).ok_or_else(|| missing(&format!("buffer `{key}`")));
                let shape = b.get("shape").and_then(Json::as_array).ok_or_else(|| missing("buffer `shape`"))?;
                let labels = b.get("labels").and_then(Json::as_array).ok_or_else(|| missing("buffer `labels`"))?;
                Ok(BufferSummary {
                    name: text("name")?.to_string(),
                    dtype: dtype(text("dtype")?),
                    mapped: text("memory")? == "mapped",
                    labels: labels.iter().filter_map(|l| l.as_str().map(str::to_string)).collect(),
                    elements: shape.iter().map(|d| if let Json::Number(n) = d { *n as u64 } else { 0 }).product(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(PlanSummary { pipe, buffers })
    }

    /// piperun's readback labels in its order, each with whether its value is an integer: every
    /// mapped buffer's labels, or `name[i]` for its first eight elements without labels.
    pub fn diagnostic_labels(&self) -> Vec<(String, bool)> {
        let mut out = Vec::new();
        for buffer in self.buffers.iter().filter(|b| b.mapped) {
            let integer = buffer.dtype.is_some_and(DType::is_integer);
            if buffer.labels.is_empty() {
                out.extend((0..buffer.elements.min(8)).map(|i| (format!("{}[{i}]", buffer.name), integer)));
            } else {
                out.extend(buffer.labels.iter().map(|label| (label.clone(), integer)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_reads_every_kind_of_value() {
        let value =
            Json::parse(r#" {"a": [1, -2.5e3, true, false, null], "s": "q\"\\\/\n\u00e9\ud83d\ude00", "o": {}} "#)
                .unwrap();
        assert_eq!(
            value.get("a").unwrap(),
            &Json::Array(vec![
                Json::Number(1.0),
                Json::Number(-2500.0),
                Json::Bool(true),
                Json::Bool(false),
                Json::Null
            ])
        );
        assert_eq!(value.get("s").and_then(Json::as_str), Some("q\"\\/\n\u{e9}\u{1F600}"));
        assert_eq!(value.get("o"), Some(&Json::Object(vec![])));
    }

    #[test]
    fn malformed_json_is_one_line_with_its_place() {
        for (text, what) in [
            (r#"{"a": 1"#, "a missing `,` or closing bracket"),
            ("[1, 2] x", "text after"),
            (r#"{"a" 1}"#, "a missing `:`"),
            (r#""abc"#, "an unterminated string"),
            ("", "the end of the text"),
            ("[tru]", "an unknown word"),
        ] {
            let error = Json::parse(text).unwrap_err();
            assert!(error.message.starts_with("plan.json: ") && error.message.contains(what), "{text}: {error}");
            assert_eq!(error.kind, ErrorKind::Bundle);
        }
    }

    #[test]
    fn the_labels_follow_piperuns_readback() {
        let plan = r#"{"pipe": "p.pipe", "buffers": [
            {"name": "x", "dtype": "f32", "memory": "device", "shape": [4], "labels": []},
            {"name": "diag", "dtype": "f32", "memory": "mapped", "shape": [2], "labels": ["loss", "lr"]},
            {"name": "count", "dtype": "u32", "memory": "mapped", "shape": [10], "labels": []}]}"#;
        let summary = PlanSummary::from_json(plan).unwrap();
        assert_eq!(summary.pipe, "p.pipe");
        let labels = summary.diagnostic_labels();
        assert_eq!(
            labels[..3],
            [("loss".to_string(), false), ("lr".to_string(), false), ("count[0]".to_string(), true)]
        );
        assert_eq!(labels.len(), 2 + 8);
    }

    #[test]
    fn the_rl_step_plan_reads() {
        let text = include_str!("../../../../tests/golden/rl_step.plan.json");
        let summary = PlanSummary::from_json(text).unwrap();
        assert_eq!(summary.pipe, "pipelines/rl_step.pipe");
        let labels: Vec<String> = summary.diagnostic_labels().into_iter().map(|(label, _)| label).collect();
        assert_eq!(labels, ["step", "mean_return_100", "episodes", "loss", "loss_ema", "lr", "epsilon", "replay_size"]);
    }
}
