//! Builds the AF_XDP pieces: the XDP program (`csrc/squall_xdp.bpf.c`, clang -target bpf,
//! embedded in the library by `afxdp::prog`) and the C shim over libxdp/libbpf
//! (`csrc/xsk_shim.c`, linked with `-lxdp -lbpf` as pkg-config gives them). Needs clang,
//! libxdp-dev and libbpf-dev (`scripts/deps.sh run` installs them on Debian 12).

use std::path::PathBuf;
use std::process::Command;

fn pkg_config(args: &[&str]) -> Vec<String> {
    let out = Command::new("pkg-config")
        .args(args)
        .args(["libxdp", "libbpf"])
        .output()
        .unwrap_or_else(|e| panic!("pkg-config: {e} (run scripts/deps.sh run)"));
    assert!(
        out.status.success(),
        "pkg-config libxdp libbpf failed: {} (install libxdp-dev and libbpf-dev: scripts/deps.sh run)",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let bpf_src = "csrc/squall_xdp.bpf.c";
    let shim_src = "csrc/xsk_shim.c";
    println!("cargo:rerun-if-changed={bpf_src}");
    println!("cargo:rerun-if-changed={shim_src}");
    println!("cargo:rerun-if-changed=build.rs");

    // The XDP program. The multiarch include directory holds <asm/types.h> for the BPF
    // target (linux-libc-dev).
    let clang = std::env::var("BPF_CLANG").unwrap_or_else(|_| "clang".into());
    let target = std::env::var("TARGET").unwrap_or_default();
    let multiarch = match target.split('-').next() {
        Some("aarch64") => "aarch64-linux-gnu",
        _ => "x86_64-linux-gnu",
    };
    let obj = out.join("squall_xdp.o");
    let st = Command::new(&clang)
        .args(["-O2", "-g", "-Wall", "-target", "bpf"])
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", bpf_src, "-o"])
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("{clang}: {e} (install clang: scripts/deps.sh run)"));
    assert!(st.success(), "clang -target bpf {bpf_src} failed");

    // The shim.
    let mut b = cc::Build::new();
    b.file(shim_src)
        .warnings(true)
        .flag_if_supported("-Wno-unused-parameter");
    for f in pkg_config(&["--cflags"]) {
        b.flag(&f);
    }
    b.compile("squall_xsk_shim");
    for f in pkg_config(&["--libs"]) {
        if let Some(l) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={l}");
        } else if let Some(p) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={p}");
        }
    }
}
