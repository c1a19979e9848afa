// velero-uploader is a test oracle for crates/hawser-kopia: it writes and reads kopia repositories
// in an S3 bucket with Velero's own code, through the layers Velero uses for a pod volume backup:
// the repository provider's PrepareRepo (as the server: creates the kopia repository and the
// udmrepo.Repository blob) and BoostRepoConnect (as the node-agent: connects a local config), then
// the kopia uploader provider, whose RunBackup / RunRestore open the unified repository
// (udmrepo.BackupRepo) and run pkg/uploader/kopia's Backup / Restore through the kopia shim.
// Both providers take credentials.CredentialGetter, a type under velero/internal that no other
// module may name; it is built through reflection from the providers' own signatures.
//
//	velero-uploader backup  COMMON --source DIR --real-source <ns>/<pod>/<volume>  -> {"snapshotID","size"}
//	velero-uploader restore COMMON --snapshot ID --target DIR                     -> {"size"}
//	velero-uploader list    COMMON                                                -> [{"id","path",...}]
//	COMMON: --endpoint HOST:PORT --bucket B --prefix [<bsl-prefix>/]kopia/<ns>/ --password P
//
// Velero builds a repository's prefix as <BSL prefix>/kopia/<volume namespace>/, so --prefix must
// end in kopia/<namespace>/. stdout carries one JSON document; the log goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/kopia/kopia/snapshot"
	"github.com/sirupsen/logrus"
	corev1api "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	velerov1api "github.com/vmware-tanzu/velero/pkg/apis/velero/v1"
	repokeys "github.com/vmware-tanzu/velero/pkg/repository/keys"
	repoprovider "github.com/vmware-tanzu/velero/pkg/repository/provider"
	"github.com/vmware-tanzu/velero/pkg/repository/udmrepo"
	reposervice "github.com/vmware-tanzu/velero/pkg/repository/udmrepo/service"
	"github.com/vmware-tanzu/velero/pkg/uploader"
	uploaderkopia "github.com/vmware-tanzu/velero/pkg/uploader/kopia"
	uploaderprovider "github.com/vmware-tanzu/velero/pkg/uploader/provider"
)

// The requester name Velero's pod volume backup/restore micro services give the data path.
const podVolumeRequester = "snapshot-pod-volume"

type options struct {
	endpoint, bucket, prefix, password, workDir, logLevel string
	source, realSource, snapshotID, target                string
}

// session holds what Velero's server and node-agent would have: the storage location, the
// BackupRepository object, the credential stores and the logger.
type session struct {
	ctx      context.Context
	log      *logrus.Logger
	bsl      *velerov1api.BackupStorageLocation
	repo     *velerov1api.BackupRepository
	password string
	credFile string
}

// secretStore answers Velero's request for the repository password (repokeys.RepoKeySelector).
type secretStore struct{ password string }

func (s secretStore) Get(sel *corev1api.SecretKeySelector) (string, error) {
	want := repokeys.RepoKeySelector()
	if sel == nil || sel.Name != want.Name || sel.Key != want.Key {
		return "", fmt.Errorf("no secret for selector %v", sel)
	}
	return s.password, nil
}

// GetPassword makes secretStore a udmrepo.PasswordGetter too.
func (s secretStore) GetPassword(any) (string, error) { return s.password, nil }

// fileStore hands Velero the path of an AWS shared-credentials file for the BSL's credential.
type fileStore struct{ path string }

func (f fileStore) Path(*corev1api.SecretKeySelector) (string, error) { return f.path, nil }

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: %s backup|restore|list|maintain [flags]", filepath.Base(os.Args[0])))
	}
	cmd := os.Args[1]
	var o options
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	fs.StringVar(&o.endpoint, "endpoint", "", "S3 endpoint HOST:PORT (plain http)")
	fs.StringVar(&o.bucket, "bucket", "", "bucket name")
	fs.StringVar(&o.prefix, "prefix", "", "repository prefix, [<bsl-prefix>/]kopia/<namespace>/")
	fs.StringVar(&o.password, "password", "", "repository password")
	fs.StringVar(&o.workDir, "work-dir", "", "HOME for Velero/kopia config and cache (default: a temporary directory, removed at exit)")
	fs.StringVar(&o.logLevel, "log-level", "info", "logrus level for the log on stderr")
	switch cmd {
	case "backup":
		fs.StringVar(&o.source, "source", "", "directory to back up")
		fs.StringVar(&o.realSource, "real-source", "", "<ns>/<pod>/<volume>, as Velero's GetRealSource makes it")
	case "restore":
		fs.StringVar(&o.snapshotID, "snapshot", "", "snapshot (manifest) ID")
		fs.StringVar(&o.target, "target", "", "directory to restore into")
	case "list", "maintain":
	default:
		fail(fmt.Errorf("unknown subcommand %q", cmd))
	}
	_ = fs.Parse(os.Args[2:])
	if o.endpoint == "" || o.bucket == "" || o.prefix == "" || o.password == "" {
		fail(fmt.Errorf("--endpoint, --bucket, --prefix and --password are required"))
	}

	s, cleanup, err := newSession(o)
	if err != nil {
		fail(err)
	}
	var out any
	switch cmd {
	case "backup":
		out, err = s.backup(o.source, o.realSource)
	case "restore":
		out, err = s.restore(o.snapshotID, o.target)
	case "list":
		out, err = s.list()
	case "maintain":
		out, err = s.maintain()
	}
	cleanup()
	if err != nil {
		fail(err)
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "velero-uploader:", err)
	os.Exit(1)
}

func newSession(o options) (*session, func(), error) {
	log := logrus.New()
	log.Out = os.Stderr
	if lvl, err := logrus.ParseLevel(o.logLevel); err == nil {
		log.SetLevel(lvl)
	}

	parts := strings.Split(strings.Trim(o.prefix, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-2] != velerov1api.BackupRepositoryTypeKopia {
		return nil, nil, fmt.Errorf("--prefix %q does not end in kopia/<namespace>/", o.prefix)
	}
	namespace := parts[len(parts)-1]
	bslPrefix := strings.Join(parts[:len(parts)-2], "/")

	work, cleanup := o.workDir, func() {}
	if work == "" {
		dir, err := os.MkdirTemp("", "velero-uploader-")
		if err != nil {
			return nil, nil, err
		}
		work, cleanup = dir, func() { _ = os.RemoveAll(dir) }
	}
	// The kopia library reads KOPIA_* variables (KOPIA_CACHE_DIRECTORY overrides the cache
	// directory of every repository it opens, and a failed connect deletes that directory) and
	// the AWS SDK prefers AWS_* credentials to the BSL's credentials file: a test that also runs
	// the kopia CLI or AWS tools must not leak them into this process.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "KOPIA_") || strings.HasPrefix(name, "AWS_") {
			_ = os.Unsetenv(name)
		}
	}
	// Velero keeps repository config files under $HOME/udmrepo and kopia its caches under the
	// user cache directory; both go into the work directory.
	_ = os.Setenv("HOME", work)
	_ = os.Setenv("XDG_CACHE_HOME", filepath.Join(work, ".cache"))
	credFile := filepath.Join(work, "cloud-credentials")
	creds := "[default]\naws_access_key_id=testing\naws_secret_access_key=testing\n"
	if err := os.WriteFile(credFile, []byte(creds), 0o600); err != nil {
		cleanup()
		return nil, nil, err
	}

	bsl := &velerov1api.BackupStorageLocation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: "default"},
		Spec: velerov1api.BackupStorageLocationSpec{
			Provider: "velero.io/aws",
			Config: map[string]string{
				"region":           "us-east-1",
				"s3Url":            "http://" + o.endpoint,
				"s3ForcePathStyle": "true",
			},
			Credential:  &corev1api.SecretKeySelector{LocalObjectReference: corev1api.LocalObjectReference{Name: "cloud-credentials"}, Key: "cloud"},
			StorageType: velerov1api.StorageType{ObjectStorage: &velerov1api.ObjectStorageLocation{Bucket: o.bucket, Prefix: bslPrefix}},
		},
	}
	repo := &velerov1api.BackupRepository{
		ObjectMeta: metav1.ObjectMeta{Namespace: "velero", Name: namespace + "-default-kopia", UID: types.UID("hawser-velero-uploader")},
		Spec: velerov1api.BackupRepositorySpec{
			VolumeNamespace:       namespace,
			BackupStorageLocation: bsl.Name,
			RepositoryType:        velerov1api.BackupRepositoryTypeKopia,
		},
	}
	s := &session{ctx: context.Background(), log: log, bsl: bsl, repo: repo, password: o.password, credFile: credFile}
	return s, cleanup, nil
}

// credentialGetter builds a value of Velero's internal credentials.CredentialGetter (or a pointer
// to one), taking the type from parameter i of a public Velero function.
func (s *session) credentialGetter(fn any, i int) reflect.Value {
	t := reflect.TypeOf(fn).In(i)
	isPtr := t.Kind() == reflect.Pointer
	if isPtr {
		t = t.Elem()
	}
	v := reflect.New(t)
	v.Elem().FieldByName("FromFile").Set(reflect.ValueOf(fileStore{s.credFile}))
	v.Elem().FieldByName("FromSecret").Set(reflect.ValueOf(secretStore{s.password}))
	if isPtr {
		return v
	}
	return v.Elem()
}

func (s *session) repoProvider() repoprovider.Provider {
	fn := repoprovider.NewUnifiedRepoProvider
	out := reflect.ValueOf(fn).Call([]reflect.Value{
		s.credentialGetter(fn, 0), reflect.ValueOf(velerov1api.BackupRepositoryTypeKopia), reflect.ValueOf(s.log),
	})
	return out[0].Interface().(repoprovider.Provider)
}

// uploaderProvider connects the local config as the node-agent's data path does (optionally
// creating the repository first, as the server does) and opens the kopia uploader provider.
func (s *session) uploaderProvider(create bool) (uploaderprovider.Provider, error) {
	rp := s.repoProvider()
	param := repoprovider.RepoParam{BackupLocation: s.bsl, BackupRepo: s.repo}
	if create {
		if err := rp.PrepareRepo(s.ctx, param); err != nil {
			return nil, fmt.Errorf("prepare repository: %w", err)
		}
	}
	if err := rp.BoostRepoConnect(s.ctx, param); err != nil {
		return nil, fmt.Errorf("connect repository: %w", err)
	}
	fn := uploaderprovider.NewUploaderProvider
	ft := reflect.TypeOf(fn)
	out := reflect.ValueOf(fn).Call([]reflect.Value{
		reflect.ValueOf(s.ctx),
		reflect.Zero(ft.In(1)), // no Kubernetes client: the kopia provider does not use it
		reflect.ValueOf(uploader.KopiaType),
		reflect.ValueOf(podVolumeRequester),
		reflect.ValueOf(""),
		reflect.ValueOf(s.bsl),
		reflect.ValueOf(s.repo),
		s.credentialGetter(fn, 7),
		reflect.ValueOf(repokeys.RepoKeySelector()),
		reflect.ValueOf(s.log),
	})
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, fmt.Errorf("open uploader provider: %w", err)
	}
	return out[0].Interface().(uploaderprovider.Provider), nil
}

type noProgress struct{}

func (noProgress) UpdateProgress(*uploader.Progress) {}

func (s *session) backup(source, realSource string) (any, error) {
	if source == "" || realSource == "" {
		return nil, fmt.Errorf("--source and --real-source are required")
	}
	p, err := s.uploaderProvider(true)
	if err != nil {
		return nil, err
	}
	defer p.Close(s.ctx)
	// As the pod volume backup micro service: empty tags, no parent, not forced full, no settings.
	id, _, size, _, err := p.RunBackup(s.ctx, source, realSource, map[string]string{}, false, "",
		uploader.PersistentVolumeFilesystem, nil, noProgress{})
	if err != nil {
		return nil, err
	}
	return map[string]any{"snapshotID": id, "size": size}, nil
}

func (s *session) restore(snapshotID, target string) (any, error) {
	if snapshotID == "" || target == "" {
		return nil, fmt.Errorf("--snapshot and --target are required")
	}
	p, err := s.uploaderProvider(false)
	if err != nil {
		return nil, err
	}
	defer p.Close(s.ctx)
	size, err := p.RunRestore(s.ctx, snapshotID, target, uploader.PersistentVolumeFilesystem, nil, noProgress{})
	if err != nil {
		return nil, err
	}
	return map[string]any{"size": size}, nil
}

// list opens the unified repository as Velero's repository provider does for Forget and lists the
// snapshot manifests through the kopia shim.
func (s *session) list() (any, error) {
	if err := s.repoProvider().BoostRepoConnect(s.ctx, repoprovider.RepoParam{BackupLocation: s.bsl, BackupRepo: s.repo}); err != nil {
		return nil, fmt.Errorf("connect repository: %w", err)
	}
	opts, err := udmrepo.NewRepoOptions(
		udmrepo.WithPassword(secretStore{s.password}, nil),
		udmrepo.WithConfigFile("", string(s.repo.UID)),
		udmrepo.WithDescription("list"),
	)
	if err != nil {
		return nil, err
	}
	bkRepo, err := reposervice.Create(velerov1api.BackupRepositoryTypeKopia, s.log).Open(s.ctx, *opts)
	if err != nil {
		return nil, err
	}
	defer bkRepo.Close(s.ctx)
	rep := uploaderkopia.NewShimRepo(bkRepo)
	sources, err := snapshot.ListSources(s.ctx, rep)
	if err != nil {
		return nil, err
	}
	var mans []*snapshot.Manifest
	for _, si := range sources {
		m, err := snapshot.ListSnapshots(s.ctx, rep, si)
		if err != nil {
			return nil, err
		}
		mans = append(mans, m...)
	}
	sort.Slice(mans, func(i, j int) bool { return mans[i].StartTime.Before(mans[j].StartTime) })
	res := []map[string]any{}
	for _, m := range mans {
		res = append(res, map[string]any{
			"id": m.ID, "source": m.Source.String(), "userName": m.Source.UserName, "host": m.Source.Host,
			"path": m.Source.Path, "tags": m.Tags, "description": m.Description, "pins": m.Pins,
			"rootID": m.RootObjectID().String(), "size": m.Stats.TotalFileSize, "startTime": m.StartTime.ToTime().UTC(),
		})
	}
	return res, nil
}

// maintain runs the repository's maintenance as Velero's maintenance job does (the provider's
// PruneRepo: kopia's maintenance, not forced, as Velero's repository user).
func (s *session) maintain() (any, error) {
	param := repoprovider.RepoParam{BackupLocation: s.bsl, BackupRepo: s.repo}
	rp := s.repoProvider()
	if err := rp.BoostRepoConnect(s.ctx, param); err != nil {
		return nil, fmt.Errorf("connect repository: %w", err)
	}
	if err := rp.PruneRepo(s.ctx, param); err != nil {
		return nil, fmt.Errorf("maintain repository: %w", err)
	}
	return map[string]any{"maintained": true}, nil
}
