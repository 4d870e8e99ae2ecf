// Host names to addresses, through c-ares (a DNS client that needs no NSS, so it works
// in ldscope's static build): an IP literal as it is; otherwise the files and name
// servers /etc/resolv.conf, /etc/nsswitch.conf and /etc/hosts say, as the C library's
// resolver would (a Kubernetes service name, say). LDSCOPE_DNS_SERVERS
// ("IP[:PORT],...") replaces resolv.conf's name servers.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "text/result.h"

namespace ldscope::net {

struct Address {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

// The addresses of host (all families, in the resolver's order) with port set, within
// timeout_ms. The error names the host and says why ("not found", "timed out").
Result<std::vector<Address>> Resolve(const std::string& host, uint16_t port, int timeout_ms);

// The address as text: 127.0.0.1, [::1].
std::string AddressText(const Address& a);

}  // namespace ldscope::net
