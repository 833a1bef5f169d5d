//! Build script of squall-port.
//! - AF_XDP (always): the XDP program (`csrc/squall_xdp.bpf.c`, clang -target bpf,
//!   embedded in the library by `afxdp::prog`) and the C shim over libxdp/libbpf
//!   (`csrc/xsk_shim.c`, linked with `-lxdp -lbpf` as pkg-config gives them). Needs clang,
//!   libxdp-dev and libbpf-dev (`scripts/deps.sh run` installs them on Debian 12).
//! - The lab's RSS on a tap (always): the steering program `csrc/tap_rss.bpf.c` and its
//!   loader shim `csrc/tap_rss_shim.c` (libbpf), used by `tap_rss`.
//! - DPDK (cargo feature `dpdk`): the C shim `csrc/dpdk_shim.c` against Debian's
//!   `libdpdk-dev` (flags from `pkg-config --cflags --libs libdpdk`), linked with DPDK's
//!   shared libraries. The PMDs (net_memif, net_af_packet, ...) are not linked: the EAL
//!   loads them at init from its plugin directory (`RTE_EAL_PMD_PATH`), or from `-d` EAL
//!   options.

use std::path::PathBuf;
use std::process::Command;

/// `pkg-config ARGS PACKAGES`, split into flags; `hint` says what to install.
fn pkg_config(args: &[&str], packages: &[&str], hint: &str) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .args(packages)
        .output()
        .unwrap_or_else(|e| panic!("pkg-config: {e} ({hint})"));
    if !out.status.success() {
        panic!(
            "`pkg-config {} {}` failed: {} ({hint})",
            args.join(" "),
            packages.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Links what `pkg-config --libs` gave (`dylib`: force shared libraries).
fn link(flags: &[String], dylib: bool) {
    for f in flags {
        if let Some(l) = f.strip_prefix("-l") {
            if dylib {
                println!("cargo:rustc-link-lib=dylib={l}");
            } else {
                println!("cargo:rustc-link-lib={l}");
            }
        } else if let Some(p) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={p}");
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    afxdp();
    #[cfg(feature = "dpdk")]
    dpdk();
}

fn afxdp() {
    const HINT: &str = "install libxdp-dev and libbpf-dev: scripts/deps.sh run";
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let shim_src = "csrc/xsk_shim.c";
    let tap_src = "csrc/tap_rss_shim.c";
    println!("cargo:rerun-if-changed={shim_src}");
    println!("cargo:rerun-if-changed={tap_src}");

    // The XDP program, and the tap steering program of the lab's RSS (`tap_rss`).
    bpf_object(&out, "squall_xdp");
    bpf_object(&out, "tap_rss");

    // The shims, one library.
    let mut b = cc::Build::new();
    b.file(shim_src)
        .file(tap_src)
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter");
    for f in pkg_config(&["--cflags"], &["libxdp", "libbpf"], HINT) {
        b.flag(&f);
    }
    b.compile("squall_xsk_shim");
    link(&pkg_config(&["--libs"], &["libxdp", "libbpf"], HINT), false);
}

/// Compiles `csrc/NAME.bpf.c` to `OUT_DIR/NAME.o` (clang -target bpf); the multiarch
/// include directory holds <asm/types.h> for the BPF target (linux-libc-dev).
fn bpf_object(out: &std::path::Path, name: &str) {
    let src = format!("csrc/{name}.bpf.c");
    println!("cargo:rerun-if-changed={src}");
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let target = std::env::var("TARGET").unwrap_or_default();
    let multiarch = match target.split('-').next() {
        Some("aarch64") => "aarch64-linux-gnu",
        _ => "x86_64-linux-gnu",
    };
    let obj = out.join(format!("{name}.o"));
    let st = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-target", "bpf"])
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", &src, "-o"])
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("{clang}: {e} (install clang: scripts/deps.sh run)"));
    assert!(st.success(), "clang -target bpf {src} failed");
}

#[cfg(feature = "dpdk")]
fn dpdk() {
    const HINT: &str =
        "the dpdk feature needs DPDK's development files: apt-get install pkg-config libdpdk-dev \
         (scripts/deps.sh test installs it)";
    println!("cargo:rerun-if-changed=csrc/dpdk_shim.c");
    let mut b = cc::Build::new();
    b.file("csrc/dpdk_shim.c").warnings(true).opt_level(2);
    let cflags = pkg_config(&["--cflags"], &["libdpdk"], HINT);
    let mut it = cflags.iter();
    while let Some(f) = it.next() {
        if let Some(dir) = f.strip_prefix("-I") {
            b.include(dir);
        } else if f == "-include" {
            if let Some(h) = it.next() {
                b.flag("-include").flag(h);
            }
        } else {
            b.flag(f);
        }
    }
    b.compile("squall_dpdk_shim");
    link(&pkg_config(&["--libs"], &["libdpdk"], HINT), true);
}
