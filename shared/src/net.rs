//! IP addresses against load-balancer pool ranges: the suite's one CIDR and address-range
//! parser (gatewaycheck's pool checks, fleetlint's FL05x pool rules).
//!
//! MetalLB `IPAddressPool.spec.addresses[]` entries are CIDRs (`192.168.10.0/24`) or inclusive
//! ranges (`192.168.10.10-192.168.10.20`) (metallb.io/configuration, IPAddressPool); Cilium
//! LB-IPAM `CiliumLoadBalancerIPPool.spec.blocks[]` are `{cidr}` or `{start, stop}`
//! (docs.cilium.io network/lb-ipam).

use std::net::IpAddr;

/// An inclusive address range of one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// First address.
    pub start: IpAddr,
    /// Last address.
    pub end: IpAddr,
    /// As written in the pool.
    pub text: String,
}

fn to_u128(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v) => (false, u32::from(v) as u128),
        IpAddr::V6(v) => (true, u128::from(v)),
    }
}

impl Range {
    /// Whether `ip` lies in the range (same family only).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (f, x) = to_u128(ip);
        let (fs, s) = to_u128(self.start);
        let (fe, e) = to_u128(self.end);
        f == fs && f == fe && s <= x && x <= e
    }
}

/// Parses a CIDR (`10.0.0.0/24`, `fd00::/120`), a range (`a-b`) or a single address.
/// Errors: a message naming the text.
pub fn parse_range(text: &str) -> Result<Range, String> {
    let t = text.trim();
    let bad = || format!("{t:?} is not a CIDR, an address range a-b or an address");
    if let Some((a, b)) = t.split_once('-') {
        let start: IpAddr = a.trim().parse().map_err(|_| bad())?;
        let end: IpAddr = b.trim().parse().map_err(|_| bad())?;
        return Ok(Range {
            start,
            end,
            text: t.into(),
        });
    }
    if let Some((a, p)) = t.split_once('/') {
        let ip: IpAddr = a.parse().map_err(|_| bad())?;
        let prefix: u32 = p.parse().map_err(|_| bad())?;
        let (v6, x) = to_u128(ip);
        let bits = if v6 { 128 } else { 32 };
        if prefix > bits {
            return Err(bad());
        }
        let host = bits - prefix;
        let mask: u128 = if host == 128 {
            u128::MAX
        } else {
            (1u128 << host) - 1
        };
        let (s, e) = (x & !mask, x | mask);
        let mk = |n: u128| -> IpAddr {
            if v6 {
                IpAddr::V6(n.into())
            } else {
                IpAddr::V4((n as u32).into())
            }
        };
        return Ok(Range {
            start: mk(s),
            end: mk(e),
            text: t.into(),
        });
    }
    let ip: IpAddr = t.parse().map_err(|_| bad())?;
    Ok(Range {
        start: ip,
        end: ip,
        text: t.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_range_and_single() {
        let r = parse_range("192.168.10.0/24").unwrap();
        assert!(r.contains("192.168.10.255".parse().unwrap()));
        assert!(!r.contains("192.168.11.0".parse().unwrap()));
        let r = parse_range("10.0.0.10-10.0.0.20").unwrap();
        assert!(r.contains("10.0.0.20".parse().unwrap()));
        assert!(!r.contains("10.0.0.21".parse().unwrap()));
        assert!(!r.contains("::1".parse().unwrap()));
        let r = parse_range("fd00::/120").unwrap();
        assert!(r.contains("fd00::ff".parse().unwrap()));
        assert!(
            parse_range("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert!(parse_range("10.0.0.0/33").is_err());
        assert!(parse_range("pool").is_err());
    }
}
