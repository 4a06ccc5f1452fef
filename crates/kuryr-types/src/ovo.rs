//! The oslo.versionedobjects "primitive" envelope that upstream stores in `KuryrPort.status.vifs`:
//! `{"versioned_object.name", "versioned_object.namespace", "versioned_object.version",
//! "versioned_object.data", "versioned_object.changes"?}`, plus helpers to read and write the
//! fields of `data` without losing anything (unknown fields and explicit `null`s are kept, so a
//! document read from upstream is written back identically).

use serde_json::{Map, Value};

/// Envelope key of the class name.
pub const KEY_NAME: &str = "versioned_object.name";
/// Envelope key of the namespace (`os_vif` for every object kuryr stores).
pub const KEY_NAMESPACE: &str = "versioned_object.namespace";
/// Envelope key of the object version (`"1.0"`, …).
pub const KEY_VERSION: &str = "versioned_object.version";
/// Envelope key of the field values.
pub const KEY_DATA: &str = "versioned_object.data";
/// Envelope key of the list of changed fields (present only when some fields were changed).
pub const KEY_CHANGES: &str = "versioned_object.changes";
/// The namespace of os-vif objects (kuryr's own VIF classes inherit it).
pub const OS_VIF_NAMESPACE: &str = "os_vif";

/// Why a primitive could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OvoError {
    /// The value at `path` is not a JSON object.
    #[error("{path}: expected an object")]
    NotAnObject {
        /// JSON path of the value.
        path: String,
    },
    /// A required key is absent.
    #[error("{path}: missing {key}")]
    Missing {
        /// JSON path of the object.
        path: String,
        /// The absent key.
        key: String,
    },
    /// A key has a value of the wrong JSON type.
    #[error("{path}.{key}: expected {expected}")]
    WrongType {
        /// JSON path of the object.
        path: String,
        /// The key.
        key: String,
        /// Expected JSON type.
        expected: &'static str,
    },
}

/// Envelope metadata of one versioned object, kept so that it is written back as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OvoMeta {
    /// `versioned_object.namespace`.
    pub namespace: String,
    /// `versioned_object.version`.
    pub version: String,
    /// `versioned_object.changes`, when present.
    pub changes: Option<Vec<String>>,
    /// Other envelope keys (none known; kept for fidelity).
    pub extra: Map<String, Value>,
}

impl OvoMeta {
    /// Metadata of a new os-vif object of the given version, without a change list.
    pub fn os_vif(version: &str) -> Self {
        OvoMeta {
            namespace: OS_VIF_NAMESPACE.to_string(),
            version: version.to_string(),
            changes: None,
            extra: Map::new(),
        }
    }
}

/// Splits a primitive into class name, metadata and data fields.
pub fn open(value: Value, path: &str) -> Result<(String, OvoMeta, Map<String, Value>), OvoError> {
    let Value::Object(mut m) = value else {
        return Err(OvoError::NotAnObject { path: path.into() });
    };
    let mut take_str = |key: &str| -> Result<String, OvoError> {
        match m.remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(OvoError::WrongType {
                path: path.into(),
                key: key.into(),
                expected: "a string",
            }),
            None => Err(OvoError::Missing {
                path: path.into(),
                key: key.into(),
            }),
        }
    };
    let name = take_str(KEY_NAME)?;
    let namespace = take_str(KEY_NAMESPACE)?;
    let version = take_str(KEY_VERSION)?;
    let data = match m.remove(KEY_DATA) {
        Some(Value::Object(d)) => d,
        Some(_) => {
            return Err(OvoError::WrongType {
                path: path.into(),
                key: KEY_DATA.into(),
                expected: "an object",
            });
        }
        None => Map::new(),
    };
    let changes = match m.remove(KEY_CHANGES) {
        None => None,
        Some(Value::Array(a)) => Some(
            a.into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(OvoError::WrongType {
                        path: path.into(),
                        key: KEY_CHANGES.into(),
                        expected: "a list of strings",
                    }),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(OvoError::WrongType {
                path: path.into(),
                key: KEY_CHANGES.into(),
                expected: "a list of strings",
            });
        }
    };
    Ok((
        name,
        OvoMeta {
            namespace,
            version,
            changes,
            extra: m,
        },
        data,
    ))
}

/// Builds a primitive from class name, metadata and data fields.
pub fn close(name: &str, meta: &OvoMeta, data: Map<String, Value>) -> Value {
    let mut m = Map::new();
    m.insert(KEY_NAME.into(), Value::String(name.into()));
    m.insert(KEY_NAMESPACE.into(), Value::String(meta.namespace.clone()));
    m.insert(KEY_VERSION.into(), Value::String(meta.version.clone()));
    m.insert(KEY_DATA.into(), Value::Object(data));
    if let Some(c) = &meta.changes {
        m.insert(
            KEY_CHANGES.into(),
            Value::Array(c.iter().cloned().map(Value::String).collect()),
        );
    }
    for (k, v) in &meta.extra {
        m.entry(k.clone()).or_insert_with(|| v.clone());
    }
    Value::Object(m)
}

/// Reads typed fields out of `versioned_object.data`. A field that is absent or `null` reads as
/// `None`; a `null` stays in the remaining map so it is written back.
pub struct Fields {
    path: String,
    data: Map<String, Value>,
}

impl Fields {
    /// Starts reading `data` found at `path` (for error messages).
    pub fn new(path: &str, data: Map<String, Value>) -> Self {
        Fields {
            path: path.to_string(),
            data,
        }
    }

    /// JSON path of a field (for nested objects).
    pub fn path_of(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        match self.data.get(key) {
            None | Some(Value::Null) => None,
            Some(_) => self.data.remove(key),
        }
    }

    fn wrong(&self, key: &str, expected: &'static str) -> OvoError {
        OvoError::WrongType {
            path: self.path.clone(),
            key: key.into(),
            expected,
        }
    }

    /// A string field.
    pub fn str(&mut self, key: &str) -> Result<Option<String>, OvoError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => {
                self.data.insert(key.into(), v);
                Err(self.wrong(key, "a string"))
            }
        }
    }

    /// A boolean field.
    pub fn bool(&mut self, key: &str) -> Result<Option<bool>, OvoError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(self.wrong(key, "a boolean")),
        }
    }

    /// An integer field.
    pub fn int(&mut self, key: &str) -> Result<Option<i64>, OvoError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| self.wrong(key, "an integer")),
            Some(_) => Err(self.wrong(key, "an integer")),
        }
    }

    /// A list-of-strings field.
    pub fn str_list(&mut self, key: &str) -> Result<Option<Vec<String>>, OvoError> {
        match self.take(key) {
            None => Ok(None),
            Some(Value::Array(a)) => a
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    _ => Err(self.wrong(key, "a list of strings")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.wrong(key, "a list of strings")),
        }
    }

    /// A nested object field (returned as raw JSON for the caller to open).
    pub fn object(&mut self, key: &str) -> Option<Value> {
        self.take(key)
    }

    /// What is left: unknown fields and explicit `null`s.
    pub fn rest(self) -> Map<String, Value> {
        self.data
    }
}

/// Writes typed fields into a data map, then the kept remainder (which never overrides a typed
/// field).
#[derive(Default)]
pub struct Writer {
    data: Map<String, Value>,
}

impl Writer {
    /// An empty data map.
    pub fn new() -> Self {
        Self::default()
    }
    /// Writes a string field when set.
    pub fn str(&mut self, key: &str, v: &Option<String>) -> &mut Self {
        if let Some(s) = v {
            self.data.insert(key.into(), Value::String(s.clone()));
        }
        self
    }
    /// Writes a boolean field when set.
    pub fn bool(&mut self, key: &str, v: Option<bool>) -> &mut Self {
        if let Some(b) = v {
            self.data.insert(key.into(), Value::Bool(b));
        }
        self
    }
    /// Writes an integer field when set.
    pub fn int(&mut self, key: &str, v: Option<i64>) -> &mut Self {
        if let Some(n) = v {
            self.data.insert(key.into(), Value::from(n));
        }
        self
    }
    /// Writes a list-of-strings field when set.
    pub fn str_list(&mut self, key: &str, v: &Option<Vec<String>>) -> &mut Self {
        if let Some(l) = v {
            self.data.insert(
                key.into(),
                Value::Array(l.iter().cloned().map(Value::String).collect()),
            );
        }
        self
    }
    /// Writes a nested primitive when set.
    pub fn value(&mut self, key: &str, v: Option<Value>) -> &mut Self {
        if let Some(v) = v {
            self.data.insert(key.into(), v);
        }
        self
    }
    /// Adds the kept remainder and returns the data map.
    pub fn finish(&mut self, rest: &Map<String, Value>) -> Map<String, Value> {
        let mut data = std::mem::take(&mut self.data);
        for (k, v) in rest {
            data.entry(k.clone()).or_insert_with(|| v.clone());
        }
        data
    }
}

/// Reads an `ObjectListBase` primitive (`SubnetList`, `FixedIPList`, `RouteList`): its metadata
/// and the raw primitives of its `objects`.
pub fn open_list(value: Value, path: &str, expected_name: &str) -> Result<(OvoMeta, Vec<Value>), OvoError> {
    let (name, meta, mut data) = open(value, path)?;
    if name != expected_name {
        return Err(OvoError::WrongType {
            path: path.into(),
            key: KEY_NAME.into(),
            expected: "the list class of this field",
        });
    }
    let objects = match data.remove("objects") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(OvoError::WrongType {
                path: format!("{path}.{KEY_DATA}"),
                key: "objects".into(),
                expected: "a list",
            });
        }
    };
    Ok((meta, objects))
}

/// Builds an `ObjectListBase` primitive.
pub fn close_list(name: &str, meta: &OvoMeta, objects: Vec<Value>) -> Value {
    let mut data = Map::new();
    data.insert("objects".into(), Value::Array(objects));
    close(name, meta, data)
}
