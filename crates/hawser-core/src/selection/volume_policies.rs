//! The `volumePolicies` of Velero's resource policies: conditions on a claim's volume and the
//! action the first matching policy takes (`skip`, `snapshot`, `fs-backup`, `custom`).
//!
//! Conditions, all of which must hold (an absent one holds): `capacity` (`"min,max"`, either
//! side may be empty, Kubernetes quantities, bounds included), `storageClass` (the volume's
//! class is one of them), `nfs` (`{}` any NFS volume; `server`, `path` must equal),
//! `csi` (`{}` any CSI volume; `driver` must equal, every `volumeAttributes` entry must be
//! the volume's), `volumeTypes` (the volume's source, named as in the PersistentVolume spec:
//! `csi`, `nfs`, `hostPath`, `local`, …), `pvcLabels` (each label must be the claim's),
//! `pvcPhase` (the claim's `status.phase` is one of them).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// The volume sources of a PersistentVolume spec, as Velero names the volume types.
const VOLUME_TYPES: [&str; 22] = [
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flocker",
    "flexVolume",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// One volume policy: its conditions and action.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumePolicy {
    conditions: Conditions,
    /// `skip`, `snapshot`, `fs-backup` or `custom`.
    pub action: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Conditions {
    #[serde(default)]
    capacity: Option<String>,
    #[serde(skip)]
    bounds: (f64, f64),
    #[serde(default)]
    storage_class: Vec<String>,
    #[serde(default)]
    nfs: Option<Nfs>,
    #[serde(default)]
    csi: Option<Csi>,
    #[serde(default)]
    volume_types: Vec<String>,
    #[serde(default)]
    pvc_labels: BTreeMap<String, String>,
    #[serde(default)]
    pvc_phase: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Nfs {
    #[serde(default)]
    server: String,
    #[serde(default)]
    path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Csi {
    #[serde(default)]
    driver: String,
    #[serde(default)]
    volume_attributes: BTreeMap<String, String>,
}

impl VolumePolicy {
    /// A policy from its `conditions` (YAML) and action.
    ///
    /// # Errors
    /// The conditions are not the format, or the capacity is not two quantities.
    pub fn new(conditions: serde_yaml::Value, action: String) -> Result<Self, String> {
        let mut conditions: Conditions = if conditions.is_null() {
            Conditions::default()
        } else {
            serde_yaml::from_value(conditions).map_err(|e| format!("{e}"))?
        };
        conditions.bounds = capacity_bounds(conditions.capacity.as_deref().unwrap_or(","))?;
        Ok(Self { conditions, action })
    }

    /// Whether the policy's conditions hold for `claim` and its `volume` (a PersistentVolume).
    pub fn matches(&self, claim: &Value, volume: &Value) -> bool {
        let c = &self.conditions;
        let text = |v: &Value, p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (lower, upper) = c.bounds;
        let size = volume
            .pointer("/spec/capacity/storage")
            .and_then(Value::as_str)
            .and_then(|q| quantity(q).ok())
            .unwrap_or(0.0);
        let in_range = (lower == 0.0 && size <= upper)
            || (upper == 0.0 && lower <= size)
            || (lower != 0.0 && upper != 0.0 && lower <= size && size <= upper);
        let class = text(volume, "/spec/storageClassName");
        let phase = text(claim, "/status/phase");
        let one_of = |list: &[String], v: &str| {
            list.is_empty() || (!v.is_empty() && list.iter().any(|x| x == v))
        };
        let nfs = c.nfs.as_ref().is_none_or(|want| {
            volume.pointer("/spec/nfs").is_some_and(|have| {
                (want.server.is_empty() || text(have, "/server") == want.server)
                    && (want.path.is_empty() || text(have, "/path") == want.path)
            })
        });
        let csi = c.csi.as_ref().is_none_or(|want| {
            volume.pointer("/spec/csi").is_some_and(|have| {
                want.driver.is_empty()
                    || (text(have, "/driver") == want.driver
                        && want.volume_attributes.iter().all(|(k, v)| {
                            have.get("volumeAttributes")
                                .and_then(|a| a.get(k))
                                .and_then(Value::as_str)
                                == Some(v)
                        }))
            })
        });
        let kind = VOLUME_TYPES
            .iter()
            .find(|t| {
                volume
                    .pointer(&format!("/spec/{t}"))
                    .is_some_and(|v| !v.is_null())
            })
            .copied()
            .unwrap_or_default();
        let labels = crate::selection::object_labels(claim);
        in_range
            && one_of(&c.storage_class, &class)
            && nfs
            && csi
            && one_of(&c.volume_types, kind)
            && c.pvc_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && one_of(&c.pvc_phase, &phase)
    }
}

/// The bounds of a `capacity` condition, in bytes (`0` for an empty side).
fn capacity_bounds(text: &str) -> Result<(f64, f64), String> {
    let Some((lower, upper)) = text.split_once(',').filter(|(_, u)| !u.contains(',')) else {
        return Err(format!("wrong format of Capacity {text}"));
    };
    let side = |s: &str| {
        let s = s.trim();
        if s.is_empty() {
            Ok(0.0)
        } else {
            quantity(s).map_err(|e| format!("wrong format of Capacity {s} with err {e}"))
        }
    };
    Ok((side(lower)?, side(upper)?))
}

/// A Kubernetes quantity (`100Gi`, `1.5G`, `500m`, `1e3`) as a number. Written here because
/// `k8s-openapi` keeps quantities as text; a float is exact enough to compare volume sizes.
///
/// # Errors
/// It is not one.
pub fn quantity(text: &str) -> Result<f64, String> {
    const SUFFIXES: [(&str, f64); 15] = [
        ("Ki", 1024.0),
        ("Mi", 1_048_576.0),
        ("Gi", 1_073_741_824.0),
        ("Ti", 1_099_511_627_776.0),
        ("Pi", 1_125_899_906_842_624.0),
        ("Ei", 1_152_921_504_606_846_976.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let invalid = || {
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_owned()
    };
    let (number, scale) = SUFFIXES
        .iter()
        .find_map(|(suffix, scale)| text.strip_suffix(suffix).map(|n| (n, *scale)))
        .unwrap_or((text, 1.0));
    let digits = number.trim_start_matches(['+', '-']);
    let plain = digits.chars().all(|c| c.is_ascii_digit() || c == '.');
    let exponent = digits.split_once(['e', 'E']).is_some_and(|(m, e)| {
        m.chars().all(|c| c.is_ascii_digit() || c == '.')
            && e.trim_start_matches(['+', '-'])
                .chars()
                .all(|c| c.is_ascii_digit())
            && !e.is_empty()
    });
    if digits.is_empty() || !(plain || (exponent && scale == 1.0)) {
        return Err(invalid());
    }
    let value: f64 = number.parse().map_err(|_| invalid())?;
    Ok(value * scale)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a panic is how a test reports failure
mod tests {
    use serde_json::json;

    use super::*;

    fn policy(yaml: &str) -> VolumePolicy {
        VolumePolicy::new(serde_yaml::from_str(yaml).unwrap(), "skip".into()).unwrap()
    }

    fn claim(labels: Value, phase: &str) -> Value {
        json!({"metadata": {"name": "data", "labels": labels}, "status": {"phase": phase}})
    }

    fn csi_volume(size: &str, class: &str) -> Value {
        json!({"spec": {"capacity": {"storage": size}, "storageClassName": class,
            "csi": {"driver": "disk.csi.example.com", "volumeAttributes": {"tier": "gold", "zone": "a"}}}})
    }

    #[test]
    fn quantities_parse_as_kubernetes_writes_them() {
        for (text, value) in [
            ("100Gi", 107_374_182_400.0),
            ("1.5G", 1.5e9),
            ("500m", 0.5),
            ("1e3", 1000.0),
            ("10", 10.0),
            ("2Ki", 2048.0),
        ] {
            assert!((quantity(text).unwrap() - value).abs() < 1e-6, "{text}");
        }
        for bad in ["", "Gi", "ten", "1.5Q", "1e", "--1"] {
            assert!(quantity(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_condition_holds_or_fails_as_velero_decides() {
        let c = claim(json!({"app": "db"}), "Bound");
        let v = csi_volume("50Gi", "gold");
        for (yaml, expected) in [
            ("{}", true),
            ("capacity: '0,100Gi'", true),
            ("capacity: '60Gi,'", false),
            ("capacity: '10Gi,50Gi'", true),
            ("capacity: ','", true),
            ("storageClass: [gold, silver]", true),
            ("storageClass: [silver]", false),
            ("csi: {}", true),
            (
                "csi: {driver: disk.csi.example.com, volumeAttributes: {tier: gold}}",
                true,
            ),
            (
                "csi: {driver: disk.csi.example.com, volumeAttributes: {tier: iron}}",
                false,
            ),
            ("csi: {driver: other}", false),
            ("nfs: {}", false),
            ("volumeTypes: [csi, nfs]", true),
            ("volumeTypes: [hostPath]", false),
            ("pvcLabels: {app: db}", true),
            ("pvcLabels: {app: web}", false),
            ("pvcPhase: [Bound]", true),
            ("pvcPhase: [Pending]", false),
        ] {
            assert_eq!(policy(yaml).matches(&c, &v), expected, "{yaml}");
        }
        let nfs = json!({"spec": {"capacity": {"storage": "1Gi"}, "nfs": {"server": "nfs.example.com", "path": "/exports/a"}}});
        assert!(policy("nfs: {}").matches(&c, &nfs));
        assert!(policy("nfs: {server: nfs.example.com}").matches(&c, &nfs));
        assert!(!policy("nfs: {server: nfs.example.com, path: /exports/b}").matches(&c, &nfs));
        assert!(policy("volumeTypes: [nfs]").matches(&c, &nfs));
    }

    #[test]
    fn malformed_conditions_are_refused() {
        for yaml in [
            "capacity: '10Gi'",
            "capacity: 'ten,'",
            "color: blue",
            "csi: {driver: [a]}",
        ] {
            assert!(
                VolumePolicy::new(serde_yaml::from_str(yaml).unwrap(), "skip".into()).is_err(),
                "{yaml}"
            );
        }
    }
}
