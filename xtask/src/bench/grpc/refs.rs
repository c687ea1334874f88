//! The gRPC reference tools, built as a user would: ghz (a gRPC load
//! generator) with `go install`, and grpc-go's own BenchmarkService server
//! from the few lines of Go below (`google.golang.org/grpc/benchmark`'s
//! server), both from the Go module proxy into `target/xtask-bench/go/`.
//! The server also writes the service's descriptor set, which ghz needs.

use crate::cmd::{self, command};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

const GHZ_MODULE: &str = "github.com/bojand/ghz/cmd/ghz@v0.120.0";

const GO_MOD: &str =
    "module wirescope-xtask/grpcgo-bench\n\ngo 1.22\n\nrequire google.golang.org/grpc v1.67.1\n";

/// grpc-go's benchmark server on -addr; with -protoset, writes the
/// BenchmarkService descriptors (and their imports) there and exits.
const MAIN_GO: &str = r#"package main

import (
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc/benchmark"
	_ "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

func writeSet(path string) error {
	root, err := protoregistry.GlobalFiles.FindFileByPath("grpc/testing/benchmark_service.proto")
	if err != nil {
		return err
	}
	set := &descriptorpb.FileDescriptorSet{}
	done := map[string]bool{}
	var walk func(protoreflect.FileDescriptor)
	walk = func(f protoreflect.FileDescriptor) {
		if done[f.Path()] {
			return
		}
		done[f.Path()] = true
		for i := 0; i < f.Imports().Len(); i++ {
			walk(f.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	walk(root)
	out, err := proto.Marshal(set)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "listen address")
	set := flag.String("protoset", "", "write the descriptor set here and exit")
	flag.Parse()
	if *set != "" {
		if err := writeSet(*set); err != nil {
			log.Fatal(err)
		}
		return
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	stop := benchmark.StartServer(benchmark.ServerInfo{Type: "protobuf", Listener: lis})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	stop()
}
"#;

/// Paths of the built references.
pub struct Refs {
    /// The ghz binary.
    pub ghz: PathBuf,
    /// grpc-go's benchmark server.
    pub grpcgo: PathBuf,
    /// BenchmarkService descriptors for ghz.
    pub protoset: PathBuf,
}

const HOW: &str = "install Go (https://go.dev/dl, or `apt install golang`) so the bench can build them, or put `ghz` (go install github.com/bojand/ghz/cmd/ghz@v0.120.0) and a grpc-go benchmark server in target/xtask-bench/go/bin";

fn go() -> Option<PathBuf> {
    if cmd::is_installed("go") {
        return Some(PathBuf::from("go"));
    }
    let local = Path::new("/usr/local/go/bin/go");
    local.is_file().then(|| local.to_path_buf())
}

/// Build (once) and return the references.
pub fn ensure(dir: &Path) -> Result<Refs> {
    let bin = dir.join("bin");
    let refs = Refs {
        ghz: bin.join("ghz"),
        grpcgo: bin.join("grpcgo-bench"),
        protoset: bin.join("bench.protoset"),
    };
    if refs.ghz.is_file() && refs.grpcgo.is_file() && refs.protoset.is_file() {
        return Ok(refs);
    }
    let Some(go) = go() else {
        bail!("the gRPC bench needs ghz and grpc-go's benchmark server: {HOW}");
    };
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    let go_env = |c: &mut std::process::Command| {
        c.env("GOBIN", &bin).env("GOFLAGS", "-mod=mod");
    };
    if !refs.ghz.is_file() {
        eprintln!("xtask: building ghz ({GHZ_MODULE}) with go");
        let mut c = command(go.to_string_lossy().as_ref(), ["install", GHZ_MODULE]);
        go_env(&mut c);
        cmd::run(&mut c).with_context(|| format!("building ghz; otherwise {HOW}"))?;
    }
    if !refs.grpcgo.is_file() {
        eprintln!("xtask: building grpc-go's benchmark server with go");
        let src = dir.join("grpcgo-bench");
        std::fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
        std::fs::write(src.join("go.mod"), GO_MOD).context("writing go.mod")?;
        std::fs::write(src.join("main.go"), MAIN_GO).context("writing main.go")?;
        let out = refs.grpcgo.to_string_lossy().into_owned();
        let mut c = command(go.to_string_lossy().as_ref(), ["build", "-o", &out, "."]);
        c.current_dir(&src);
        go_env(&mut c);
        cmd::run(&mut c)
            .with_context(|| format!("building grpc-go's benchmark server; otherwise {HOW}"))?;
    }
    let set = refs.protoset.to_string_lossy().into_owned();
    cmd::run(&mut command(
        refs.grpcgo.to_string_lossy().as_ref(),
        ["-protoset", &set],
    ))
    .context("writing the BenchmarkService descriptor set")?;
    Ok(refs)
}
