//! Validates JSON IR profiles and prints a summary of each, or every error with its JSON
//! path. Exit status 1 if any profile is invalid.
//!
//! `cargo run -p squall-astf --example check_profile -- examples/w1-astf-http.json ...`

use squall_astf::{load_profile_file, Transport};

fn main() {
    let mut failed = false;
    for arg in std::env::args().skip(1) {
        match load_profile_file(std::path::Path::new(&arg)) {
            Ok(p) => {
                let bytes: usize = p.buffers.iter().map(|b| b.data.len()).sum();
                println!(
                    "{arg}: ok: {} buffers ({bytes} bytes), {} programs, {} ip_gens, {} templates",
                    p.buffers.len(),
                    p.programs.len(),
                    p.ip_gens.len(),
                    p.templates.len()
                );
                for t in &p.templates {
                    let tr = if t.transport == Transport::Tcp {
                        "tcp"
                    } else {
                        "udp"
                    };
                    println!(
                        "  {} [{}] {tr} port {} cps {} limit {:?}: client {:?} ({} insns), server {:?} ({} insns)",
                        t.name,
                        p.tg_names[t.tg_id as usize],
                        t.port,
                        t.cps,
                        t.limit,
                        p.program(t.client_program).name,
                        p.program(t.client_program).insns.len(),
                        p.program(t.server_program).name,
                        p.program(t.server_program).insns.len()
                    );
                }
            }
            Err(e) => {
                failed = true;
                eprintln!("{arg}: {e}");
            }
        }
    }
    std::process::exit(i32::from(failed));
}
