//! Build script of squall-port: with the `dpdk` feature, compiles the C shim
//! (`csrc/dpdk_shim.c`) against Debian's `libdpdk-dev` (flags from
//! `pkg-config --cflags --libs libdpdk`) and links DPDK's shared libraries. The PMDs
//! (net_memif, net_af_packet, ...) are not linked: the EAL loads them at init from its
//! plugin directory (`RTE_EAL_PMD_PATH`), or from `-d` EAL options. Without the feature
//! it does nothing.

#[cfg(feature = "dpdk")]
use std::process::Command;

#[cfg(feature = "dpdk")]
fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .arg("libdpdk")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "the dpdk feature needs pkg-config ({e}): apt-get install pkg-config libdpdk-dev"
            )
        });
    if !out.status.success() {
        panic!(
            "the dpdk feature needs DPDK's development files: `pkg-config {} libdpdk` failed \
             ({}); apt-get install libdpdk-dev (scripts/deps.sh test installs it)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/dpdk_shim.c");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    #[cfg(feature = "dpdk")]
    dpdk();
}

#[cfg(feature = "dpdk")]
fn dpdk() {
    let mut b = cc::Build::new();
    b.file("csrc/dpdk_shim.c").warnings(true).opt_level(2);
    let cflags = pkg_config(&["--cflags"]);
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
    for f in pkg_config(&["--libs"]) {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
}
