//! The proptest configuration of the property tests: 256 cases and a fixed seed unless
//! `PROPTEST_CASES` / `PROPTEST_RNG_SEED` ask for others (see docs/testing.md).

use proptest::test_runner::{Config, RngSeed};

/// 256 cases and a fixed seed unless the environment asks for others.
pub fn config() -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 256;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = RngSeed::Fixed(0x6861_7773_6572);
    }
    config.failure_persistence = None;
    config
}
