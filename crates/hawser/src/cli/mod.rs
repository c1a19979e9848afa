//! The `hawser` command line: Velero's verbs and flags.
