//! Provider discovery: what the endpoint asks libfabric for ([`getinfo`], [`Want`]), where it listens
//! ([`Bind`]), the providers this host offers ([`providers`]), and the bound on `ofi_rxm`'s receive buffers.

use super::*;
use std::ffi::CString;

/// The providers libfabric lists for RDM endpoints with RMA and atomics: (provider, domain, fabric) names.
pub fn providers() -> Result<Vec<(String, String, String)>> {
    let list = getinfo(None, false, Want::Host, None)?;
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        // SAFETY: a node of the list fi_getinfo returned; its attribute pointers are set by libfabric.
        unsafe {
            let name = |s: *const std::ffi::c_char| {
                if s.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(s).to_string_lossy().into_owned()
                }
            };
            out.push((
                name((*(*p).fabric_attr).prov_name),
                name((*(*p).domain_attr).name),
                name((*(*p).fabric_attr).name),
            ));
            p = (*p).next;
        }
    }
    if !list.is_null() {
        // SAFETY: the list came from fi_getinfo and is freed once.
        unsafe { fi::xfi_freeinfo(list) };
    }
    let mut seen = HashSet::new();
    out.retain(|t| seen.insert(t.clone()));
    Ok(out)
}

/// What the endpoint needs beyond RMA, atomics and two-sided messages (every PE receives: [`Inbox`]) on host
/// memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Want {
    /// Nothing more (host heaps, and device heaps through the staging path).
    Host,
    /// `FI_HMEM`: RMA and atomics on registered Level Zero memory.
    Hmem,
}

/// Where the endpoint listens: `XPUSHMEM_FABRIC_ADDR`, else the address the bootstrap used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Bind {
    /// The provider's first interface (a bootstrap that knows no address: MPI).
    Any,
    /// This address (`fi_getinfo`'s node with `FI_SOURCE`).
    Addr(std::net::IpAddr),
    /// The interface of this name (the provider's domain of that name: `eth0`, `lo`, `mlx5_0`...).
    Iface(String),
}

impl Bind {
    /// The setting's value, else the bootstrap's address.
    pub(crate) fn of(setting: Option<&str>, boot: Option<std::net::IpAddr>) -> Bind {
        match setting.map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => match v.trim_start_matches('[').trim_end_matches(']').parse() {
                Ok(ip) => Bind::Addr(ip),
                Err(_) => Bind::Iface(v.to_string()),
            },
            None => boot.map_or(Bind::Any, Bind::Addr),
        }
    }
}

/// Sets [`RXM_MSG_RX_SIZE_VAR`] to [`RXM_MSG_RX_SIZE`] unless the user set it, once, before libfabric is first
/// asked for providers (`ofi_rxm` reads it when libfabric loads it, at the first `fi_getinfo`). A user's own value
/// is kept (logged when it exceeds [`RXM_MSG_RX_SIZE`]: a flood may then be queued in rxm's memory again).
fn bound_rxm_receives() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match std::env::var(RXM_MSG_RX_SIZE_VAR) {
        Ok(v) => {
            if v.trim().parse::<usize>().map_or(true, |n| n > RXM_MSG_RX_SIZE) {
                tracing::warn!(
                    "fabric: {RXM_MSG_RX_SIZE_VAR}={v} (set by the user) exceeds {RXM_MSG_RX_SIZE}, half the \
                     receive buffers of each kind this PE keeps posted: messages arriving faster than this PE \
                     drains them (an outsider's flood) can be queued in ofi_rxm's memory without bound"
                );
            }
        }
        Err(_) => std::env::set_var(RXM_MSG_RX_SIZE_VAR, RXM_MSG_RX_SIZE.to_string()),
    });
}

/// `fi_getinfo` for what this transport needs; `provider` filters by name; `delivery` asks for
/// `FI_DELIVERY_COMPLETE`; `want` adds [`Want::Hmem`] (registration of Level Zero memory, `FI_HMEM`); `source`
/// is the local address to listen on. A null list when nothing matches.
pub(super) fn getinfo(
    provider: Option<&str>,
    delivery: bool,
    want: Want,
    source: Option<std::net::IpAddr>,
) -> Result<*mut fi::fi_info> {
    bound_rxm_receives();
    fi::load().map_err(|e| Error::Transport {
        transport: "fabric",
        message: format!("cannot load libfabric: {e}"),
    })?;
    // SAFETY: hints are allocated by libfabric and filled field by field; the provider name is a CString we give
    // back (reset to null) before fi_freeinfo, which would otherwise free it with libc's free.
    unsafe {
        let hints = fi::xfi_allocinfo();
        if hints.is_null() {
            return Err(fab_err("-", "fi_allocinfo", -(fi::FI_ENOMEM as i64)));
        }
        (*hints).caps = (fi::FI_RMA
            | fi::FI_ATOMIC
            | fi::FI_READ
            | fi::FI_WRITE
            | fi::FI_REMOTE_READ
            | fi::FI_REMOTE_WRITE
            | fi::FI_MSG
            | fi::FI_TAGGED
            | fi::FI_SEND
            | fi::FI_RECV) as u64;
        if want == Want::Hmem {
            (*hints).caps |= fi::FI_HMEM;
        }
        (*hints).mode = fi::FI_CONTEXT | fi::FI_CONTEXT2;
        (*(*hints).ep_attr).type_ = fi::FI_EP_RDM;
        (*(*hints).domain_attr).mr_mode = (fi::FI_MR_LOCAL
            | fi::FI_MR_VIRT_ADDR
            | fi::FI_MR_ALLOCATED
            | fi::FI_MR_PROV_KEY
            | fi::FI_MR_ENDPOINT
            | if want == Want::Hmem {
                fi::FI_MR_HMEM
            } else {
                0
            }) as i32;
        (*(*hints).domain_attr).threading = fi::FI_THREAD_DOMAIN;
        if delivery {
            (*(*hints).tx_attr).op_flags = fi::FI_DELIVERY_COMPLETE as u64;
        }
        let name = provider.map(|p| CString::new(p).unwrap_or_default());
        if let Some(n) = &name {
            (*(*hints).fabric_attr).prov_name = n.as_ptr().cast_mut();
        }
        let node = source.map(|ip| CString::new(ip.to_string()).unwrap_or_default());
        let mut info = std::ptr::null_mut();
        let r = fi::xfi_getinfo(
            fi::xfi_header_version(),
            node.as_ref().map_or(std::ptr::null(), |n| n.as_ptr()),
            std::ptr::null(),
            if node.is_some() { fi::FI_SOURCE } else { 0 },
            hints,
            &mut info,
        );
        (*(*hints).fabric_attr).prov_name = std::ptr::null_mut();
        fi::xfi_freeinfo(hints);
        if r == -(fi::FI_ENODATA as i32) {
            return Ok(std::ptr::null_mut());
        }
        ok(provider.unwrap_or("(any)"), "fi_getinfo", r as i64)?;
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bind_address_is_the_setting_else_the_bootstraps() {
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(Bind::of(None, Some(lo)), Bind::Addr(lo));
        assert_eq!(Bind::of(Some(""), None), Bind::Any);
        assert_eq!(
            Bind::of(Some("10.1.2.3"), Some(lo)),
            Bind::Addr("10.1.2.3".parse().unwrap())
        );
        assert_eq!(
            Bind::of(Some("[fd00::2]"), None),
            Bind::Addr("fd00::2".parse().unwrap())
        );
        assert_eq!(Bind::of(Some("eth0"), Some(lo)), Bind::Iface("eth0".into()));
    }
}
