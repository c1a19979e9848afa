//! The `string_enum!` macro: a Rust enum for a string-valued Velero enum that never fails to read.
//!
//! Velero stores phases and modes as plain strings. A value this version does not know (written by
//! a newer Velero, or by hand where the CRD does not enforce the enum) is kept verbatim in an
//! `Unknown(String)` variant instead of failing the read of the whole object, and written back
//! unchanged. The JSON schema lists only the known values, as Velero's CRDs do.

/// Declares a string enum with `as_str`, `From<&str>`, `Display`, serde and schemars support.
///
/// With `empty = Variant;` the empty string (and JSON null) reads as that variant and it is the `Default`
/// (Velero treats an empty phase as `New`); without it the empty string is `Unknown("")`.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
        $( empty = $empty:ident; )?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version does not know, kept verbatim so that it is written back
            /// unchanged.
            Unknown(String),
        }

        impl $name {
            /// Every known value, in Velero's order.
            pub const ALL: &'static [$name] = &[$( $name::$variant, )+];

            /// The exact string Velero uses for this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $text, )+
                    Self::Unknown(other) => other.as_str(),
                }
            }

            /// The exact string of a known value, `"Unknown"` for an unknown one: a label with a
            /// static lifetime (Event reasons, metric labels, error categories).
            pub fn name(&self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )+
                    Self::Unknown(_) => "Unknown",
                }
            }

            /// Reads a value; never fails (see the `Unknown` variant).
            pub fn parse(value: &str) -> Self {
                match value {
                    $( $text => Self::$variant, )+
                    $( "" => Self::$empty, )?
                    other => Self::Unknown(other.to_owned()),
                }
            }

            /// True when the value is not one this version knows.
            pub fn is_unknown(&self) -> bool {
                matches!(self, Self::Unknown(_))
            }
        }

        $(
            impl Default for $name {
                fn default() -> Self {
                    Self::$empty
                }
            }
        )?

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::parse(value)
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Ok(Self::parse(value))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " string"))
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        Ok($name::parse(v))
                    }
                    // Go reads a JSON null into a string field as "".
                    fn visit_unit<E: serde::de::Error>(self) -> Result<$name, E> {
                        Ok($name::parse(""))
                    }
                    fn visit_none<E: serde::de::Error>(self) -> Result<$name, E> {
                        Ok($name::parse(""))
                    }
                }
                deserializer.deserialize_any(Visitor)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "enum": [$( $text ),+],
                })
            }
        }
    };
}

pub(crate) use string_enum;
