//! `hawser kopia`: a kopia repository of volume data, for operators and tests
//! ([`hawser_kopia`]). The repository is Velero's of one namespace (`kopia/<namespace>/`) in a
//! BackupStorageLocation of the cluster (`--storage-location`, opened as the server opens it) or
//! in a local directory (`--directory`, the blobs side by side as in a bucket, not kopia's
//! sharded filesystem layout). The password is `--password`, else Velero's Secret
//! `velero-repo-credentials` (key `repository-password`) with a storage location, else Velero's
//! well-known default, which is warned about.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use hawser_kopia::{
    Blobs, KopiaError, Repository, RestoreOptions, Safety, Snapshot, SourceInfo,
    VELERO_DEFAULT_PASSWORD,
};
use hawser_store::{Location, LocationSpec};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::error::{CliError, ExitStatus};
use super::global::GlobalArgs;
use super::output::Table;

/// Velero's Secret of repository passwords, and its key.
const PASSWORD_SECRET: (&str, &str) = ("velero-repo-credentials", "repository-password");

/// `kopia` and where its repository is.
#[derive(Args, Debug)]
pub struct KopiaArgs {
    /// The BackupStorageLocation holding the repository.
    #[arg(long, global = true, conflicts_with = "directory")]
    pub storage_location: Option<String>,
    /// A local directory holding the repository instead.
    #[arg(long, global = true)]
    pub directory: Option<PathBuf>,
    /// The namespace whose volumes the repository holds (Velero keeps one repository per
    /// namespace, at `kopia/<namespace>/`).
    #[arg(long, global = true, default_value = "default")]
    pub volume_namespace: String,
    /// The repository's password (default: Velero's Secret, else Velero's default).
    #[arg(
        long,
        global = true,
        env = "HAWSER_KOPIA_PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
    #[command(subcommand)]
    pub command: KopiaCommand,
}

/// What to do with the repository.
#[derive(Subcommand, Debug)]
pub enum KopiaCommand {
    /// Create the repository (kopia's and Velero's defaults).
    Create {
        /// The content hash: BLAKE2B-256-128 (kopia's and Velero's default) or BLAKE3-256-128.
        #[arg(long, default_value = "BLAKE2B-256-128")]
        hash: String,
        /// How data is cut into contents, as kopia's flag: DYNAMIC-<size>-BUZHASH,
        /// DYNAMIC-<size>-RABINKARP or FIXED-<size>, size 128K, 256K, 512K, 1M, 2M, 4M or 8M.
        #[arg(long, default_value = "DYNAMIC-4M-BUZHASH")]
        object_splitter: String,
    },
    /// List its snapshots.
    Snapshots,
    /// Snapshot a directory into it.
    Snapshot {
        /// The directory.
        dir: PathBuf,
        /// The source path recorded (default: the directory's absolute path).
        #[arg(long)]
        source_path: Option<String>,
        /// The source host recorded (Velero's: default).
        #[arg(long, default_value = "default")]
        host: String,
        /// The source user recorded (Velero's: default).
        #[arg(long, default_value = "default")]
        user: String,
        /// A tag `key=value` (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
    /// Restore a snapshot into a directory (created if missing; it should be empty).
    Restore {
        /// The snapshot's ID.
        id: String,
        /// The directory.
        target: PathBuf,
    },
    /// Read every content of a snapshot, writing nothing.
    Verify {
        /// The snapshot's ID.
        id: String,
    },
    /// Delete a snapshot (its data stays until full maintenance).
    Delete {
        /// The snapshot's ID.
        id: String,
    },
    /// Run maintenance, as kopia's `maintenance run`: quick, or with `--full` also the
    /// garbage collection of what no snapshot uses.
    Maintenance {
        /// Also collect garbage (kopia's full maintenance).
        #[arg(long)]
        full: bool,
        /// Margins for what others may be writing: `full` (kopia's default) or `none` (only
        /// when nothing else writes into the repository).
        #[arg(long, value_enum, default_value_t = SafetyArg::Full)]
        safety: SafetyArg,
    },
}

/// `--safety`.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum SafetyArg {
    /// kopia's default margins.
    Full,
    /// No margins.
    None,
}

fn repository_error(what: impl Into<String>) -> impl FnOnce(KopiaError) -> CliError {
    let what = what.into();
    move |source| CliError::Repository { what, source }
}

/// Runs a `kopia` subcommand.
pub async fn run(global: &GlobalArgs, args: KopiaArgs) -> Result<ExitStatus, CliError> {
    let dir = format!("kopia/{}", args.volume_namespace);
    // A choice that cannot be written is refused before anything is touched.
    let new = match &args.command {
        KopiaCommand::Create {
            hash,
            object_splitter,
        } => {
            let new = hawser_kopia::NewRepository {
                hash: hash.clone(),
                splitter: object_splitter.clone(),
            };
            new.check().map_err(|e| {
                let flag = match &e {
                    KopiaError::Unsupported { what, .. } if *what == "splitter" => {
                        "--object-splitter"
                    }
                    _ => "--hash",
                };
                CliError::usage(flag, e.to_string())
            })?;
            Some(new)
        }
        _ => None,
    };
    let (location, password) = match (&args.storage_location, &args.directory) {
        (Some(name), _) => {
            let client = global.client().await?;
            let locations = hawser_server::Locations::new(
                client.clone(),
                global.namespace.clone(),
                hawser_store::LocationPolicy::default(),
            );
            let location = locations
                .open_named(name)
                .await
                .map_err(|e| CliError::usage("--storage-location", e.full_message()))?;
            let password = match &args.password {
                Some(p) => Some(p.clone()),
                None => match secret_password(&client, &global.namespace).await? {
                    Some(p) => Some(p),
                    // A new repository gets a password of its own, not the well-known one.
                    None if matches!(args.command, KopiaCommand::Create { .. }) => {
                        Some(create_password_secret(&client, &global.namespace).await?)
                    }
                    None => None,
                },
            };
            (location, password)
        }
        (None, Some(directory)) => {
            std::fs::create_dir_all(directory).map_err(|source| CliError::File {
                path: directory.display().to_string(),
                source,
            })?;
            // The directory is the location's bucket: `<directory>/kopia/<namespace>/`.
            let absolute = std::path::absolute(directory).map_err(|source| CliError::File {
                path: directory.display().to_string(),
                source,
            })?;
            let (Some(root), Some(bucket)) = (absolute.parent(), absolute.file_name()) else {
                return Err(CliError::usage(
                    "--directory",
                    "name a directory below the root",
                ));
            };
            let spec = LocationSpec::new("filesystem", bucket.to_string_lossy().into_owned())
                .with_config("root", root.display().to_string());
            let location =
                Location::new(&spec).map_err(|e| CliError::usage("--directory", e.to_string()))?;
            (location, args.password.clone())
        }
        (None, None) => {
            return Err(CliError::usage(
                "--storage-location",
                "name a BackupStorageLocation (or --directory) holding the repository",
            ));
        }
    };
    let password = password.unwrap_or_else(|| {
        eprintln!(
            "warning: the repository's password is Velero's well-known default; whoever can read the storage can read the volume data (set --password, or Velero's Secret {}/{})",
            global.namespace, PASSWORD_SECRET.0
        );
        VELERO_DEFAULT_PASSWORD.to_owned()
    });
    let blobs = Blobs::new(location, &dir);
    let open = || async {
        Repository::open(blobs.clone(), &password)
            .await
            .map_err(repository_error(format!("open the repository {dir}")))
    };
    match args.command {
        KopiaCommand::Create { .. } => {
            let new = new.unwrap_or_default();
            Repository::create_with(blobs.clone(), &password, &new)
                .await
                .map_err(repository_error(format!("create the repository {dir}")))?;
            println!("Repository {dir} created.");
        }
        KopiaCommand::Snapshots => {
            let snapshots = open()
                .await?
                .snapshots()
                .await
                .map_err(repository_error("list the snapshots"))?;
            print!("{}", snapshots_table(&snapshots));
        }
        KopiaCommand::Snapshot {
            dir: source,
            source_path,
            host,
            user,
            tags,
        } => {
            let mut labels = BTreeMap::new();
            for tag in &tags {
                let (key, value) = tag
                    .split_once('=')
                    .ok_or_else(|| CliError::usage("--tag", format!("{tag:?} is not key=value")))?;
                labels.insert(key.to_owned(), value.to_owned());
            }
            let path = match source_path {
                Some(p) => p,
                None => std::path::absolute(&source)
                    .map_err(|e| CliError::File {
                        path: source.display().to_string(),
                        source: e,
                    })?
                    .display()
                    .to_string(),
            };
            let info = SourceInfo { host, user, path };
            let snapshot = open()
                .await?
                .write_snapshot(&source, &info, &labels)
                .await
                .map_err(repository_error(format!("snapshot {}", source.display())))?;
            println!("Snapshot {} of {} stored.", snapshot.id, info.path);
        }
        KopiaCommand::Restore { id, target } => {
            let repo = open().await?;
            let snapshot = find(&repo, &id).await?;
            let stats = repo
                .restore(&snapshot, &target, RestoreOptions::default())
                .await
                .map_err(repository_error(format!("restore snapshot {id}")))?;
            println!(
                "Snapshot {id} restored into {}: {} files, {} directories, {} links, {} bytes.",
                target.display(),
                stats.files,
                stats.dirs,
                stats.symlinks,
                stats.bytes
            );
        }
        KopiaCommand::Verify { id } => {
            let repo = open().await?;
            let snapshot = find(&repo, &id).await?;
            let stats = repo
                .verify(&snapshot, RestoreOptions::default())
                .await
                .map_err(repository_error(format!("verify snapshot {id}")))?;
            println!(
                "Snapshot {id} verified: {} files, {} directories, {} links, {} bytes read.",
                stats.files, stats.dirs, stats.symlinks, stats.bytes
            );
        }
        KopiaCommand::Delete { id } => {
            match open().await?.delete_snapshot(&id).await {
                Err(KopiaError::MissingSnapshot(_)) => return Err(not_found(&id)),
                done => done.map_err(repository_error(format!("delete snapshot {id}")))?,
            }
            println!("Snapshot {id} deleted.");
        }
        KopiaCommand::Maintenance { full, safety } => {
            let safety = match safety {
                SafetyArg::Full => Safety::FULL,
                SafetyArg::None => Safety::NONE,
            };
            let report = open()
                .await?
                .maintain(full, &safety)
                .await
                .map_err(repository_error(format!("maintain the repository {dir}")))?;
            print!("{report}");
        }
    }
    Ok(ExitStatus::Success)
}

/// The password in Velero's Secret, if it exists.
async fn secret_password(
    client: &kube::Client,
    namespace: &str,
) -> Result<Option<String>, CliError> {
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(PASSWORD_SECRET.0)
        .await
        .map_err(|source| CliError::Api {
            action: "get",
            object: format!("Secret {namespace}/{}", PASSWORD_SECRET.0),
            source,
        })?;
    Ok(secret
        .and_then(|s| s.data)
        .and_then(|mut data| data.remove(PASSWORD_SECRET.1))
        // Velero trims the value it reads.
        .map(|bytes| String::from_utf8_lossy(&bytes.0).trim().to_owned()))
}

/// Creates Velero's password Secret with a random password and returns the password; when
/// another client created it first, its password.
async fn create_password_secret(
    client: &kube::Client,
    namespace: &str,
) -> Result<String, CliError> {
    let password = hawser_kopia::random_password();
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(PASSWORD_SECRET.0.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..kube::api::ObjectMeta::default()
        },
        type_: Some("Opaque".to_owned()),
        string_data: Some(BTreeMap::from([(
            PASSWORD_SECRET.1.to_owned(),
            password.clone(),
        )])),
        ..Secret::default()
    };
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    match api.create(&kube::api::PostParams::default(), &secret).await {
        Ok(_) => {
            println!(
                "Secret {namespace}/{} created with a random repository password.",
                PASSWORD_SECRET.0
            );
            Ok(password)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            secret_password(client, namespace).await?.ok_or_else(|| {
                CliError::usage(
                    "--password",
                    format!(
                        "Secret {namespace}/{} has no {}",
                        PASSWORD_SECRET.0, PASSWORD_SECRET.1
                    ),
                )
            })
        }
        Err(source) => Err(CliError::Api {
            action: "create",
            object: format!("Secret {namespace}/{}", PASSWORD_SECRET.0),
            source,
        }),
    }
}

async fn find(repo: &Repository, id: &str) -> Result<Snapshot, CliError> {
    repo.snapshots()
        .await
        .map_err(repository_error("list the snapshots"))?
        .into_iter()
        .find(|s| s.id == id)
        .ok_or_else(|| not_found(id))
}

fn not_found(id: &str) -> CliError {
    CliError::NotFound {
        object: format!("snapshot {id}"),
        hint: "list them with `hawser kopia snapshots`".to_owned(),
    }
}

fn snapshots_table(snapshots: &[Snapshot]) -> Table {
    let rows = snapshots
        .iter()
        .map(|s| {
            vec![
                s.id.clone(),
                format!("{}@{}:{}", s.user, s.host, s.path),
                s.start_time.map(|t| t.to_string()).unwrap_or_default(),
                s.end_time.map(|t| t.to_string()).unwrap_or_default(),
            ]
        })
        .collect();
    Table::new(&["ID", "SOURCE", "STARTED", "ENDED"], rows)
}
