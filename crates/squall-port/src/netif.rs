//! Interface facts the real-interface ports share: the MAC address and the MTU of a Linux
//! interface, read with ioctls on a socket of the caller's network namespace.

use std::io;

/// `ifreq` naming `ifname` (`kind` prefixes the error: `afpacket`, `afxdp`).
fn ifreq_for(kind: &str, ifname: &str) -> Result<libc::ifreq, String> {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let b = ifname.as_bytes();
    if b.is_empty() || b.len() >= ifr.ifr_name.len() {
        return Err(format!("{kind}:{ifname}: bad interface name"));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok(ifr)
}

fn ioctl_err(kind: &str, ifname: &str, what: &str) -> String {
    format!("{kind}:{ifname}: {what}: {}", io::Error::last_os_error())
}

/// The error for an interface name the kernel does not know here, with what to do.
pub(crate) fn no_such_interface(kind: &str, ifname: &str) -> String {
    format!(
        "{kind}:{ifname}: no such interface in this network namespace; `ip link` lists the ones here \
         (an interface of another namespace: run squall inside it, `ip netns exec NS squall ...`)"
    )
}

/// MAC address and IP MTU of `ifname`, asked through socket `s`.
pub(crate) fn mac_mtu(s: i32, kind: &str, ifname: &str) -> Result<([u8; 6], u16), String> {
    let mut ifr = ifreq_for(kind, ifname)?;
    // SAFETY: SIOCGIFHWADDR fills the ifreq we pass.
    if unsafe { libc::ioctl(s, libc::SIOCGIFHWADDR, &mut ifr) } != 0 {
        return Err(ioctl_err(kind, ifname, "SIOCGIFHWADDR"));
    }
    let mut mac = [0u8; 6];
    // SAFETY: after SIOCGIFHWADDR the union holds `ifru_hwaddr`.
    let hw = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    for (d, s) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *d = *s as u8;
    }
    let mut ifr = ifreq_for(kind, ifname)?;
    // SAFETY: SIOCGIFMTU fills the ifreq we pass.
    if unsafe { libc::ioctl(s, libc::SIOCGIFMTU, &mut ifr) } != 0 {
        return Err(ioctl_err(kind, ifname, "SIOCGIFMTU"));
    }
    // SAFETY: after SIOCGIFMTU the union holds `ifru_mtu`.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu }.clamp(68, 65_535) as u16;
    Ok((mac, mtu))
}

/// Whether an interface named `ifname` exists in the caller's network namespace.
pub fn exists(ifname: &str) -> bool {
    std::ffi::CString::new(ifname).is_ok_and(|c| {
        // SAFETY: `c` is a valid NUL-terminated string for the call.
        unsafe { libc::if_nametoindex(c.as_ptr()) != 0 }
    })
}
