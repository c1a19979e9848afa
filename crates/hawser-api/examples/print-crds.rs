//! Prints every CRD as one multi-document YAML stream (the content of `crds/velero.io.yaml`).

fn main() -> Result<(), serde_yaml::Error> {
    print!("{}", hawser_api::crd::crds_yaml()?);
    Ok(())
}
