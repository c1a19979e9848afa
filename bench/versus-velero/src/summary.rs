//! A contender's figures over the rounds: medians and spreads.

use crate::Figures;

/// The median of `values` and their spread (least, greatest).
fn median_spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        f64::midpoint(values[n / 2 - 1], values[n / 2])
    };
    (median, values[0], values[n - 1])
}

/// A contender's figures over the rounds, as medians.
pub(crate) struct Summary {
    pub(crate) name: String,
    pub(crate) empty_backup_s: f64,
    pub(crate) empty_restore_s: f64,
    pub(crate) backup_s: f64,
    pub(crate) restore_s: f64,
    /// Peak PSS over the backup and over the restore, MiB.
    pub(crate) backup_mib: f64,
    pub(crate) restore_mib: f64,
    /// The create floors (with the servers' limits, with none), medians; hawser's rounds only.
    pub(crate) floors: Option<(f64, f64)>,
}

impl Summary {
    pub(crate) fn of(name: String, rounds: &[Figures], objects: usize) -> Summary {
        let line = |what: &str, unit: &str, get: &dyn Fn(&Figures) -> f64| {
            let (median, least, greatest) = median_spread(rounds.iter().map(get).collect());
            println!(
                "{name:10} {what:22} median {median:9.2} {unit:5} (spread {least:.2}–{greatest:.2}, {} rounds)",
                rounds.len()
            );
            median
        };
        let empty_backup_s = line("empty backup", "s", &|f| f.empty_backup_s);
        let empty_restore_s = line("empty restore", "s", &|f| f.empty_restore_s);
        let backup_s = line("backup", "s", &|f| f.backup_s);
        let backup_mib = line("backup peak PSS", "MiB", &|f| {
            bench_common::mib(f.backup_pss_kib)
        });
        let restore_s = line("restore", "s", &|f| f.restore_s);
        line("restore rate", "obj/s", &|f| objects as f64 / f.restore_s);
        let restore_mib = line("restore peak PSS", "MiB", &|f| {
            bench_common::mib(f.restore_pss_kib)
        });
        let floors = rounds.iter().all(|f| f.floor_limited_s > 0.0).then(|| {
            let limited = line("create floor, limits", "s", &|f| f.floor_limited_s);
            let none = line("create floor, none", "s", &|f| f.floor_unlimited_s);
            line("restore / floor", "x", &|f| f.restore_s / f.floor_limited_s);
            (limited, none)
        });
        Summary {
            name,
            empty_backup_s,
            empty_restore_s,
            backup_s,
            restore_s,
            backup_mib,
            restore_mib,
            floors,
        }
    }
}
