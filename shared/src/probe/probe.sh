# kubectl-podresolve probe script (protocol v1). A FIXED constant: user values reach it only
# as positional arguments ("$@"), never as shell text. Run as: sh -c "$SCRIPT" podresolve
# [--step-timeout SECS] [--tls PORT] [--git URL [--git-ref REF]] [--] HOST...  Every section
# starts with "#podresolve section KIND [ARG]" and ends with "#podresolve end rc=N" (N = the
# tool's exit status, 127 = not found, 124/143 = killed by the step timeout). Git credentials
# come only from the environment (secretKeyRef): PROBE_GIT_USERNAME/PASSWORD (basic),
# PROBE_GIT_BEARER_TOKEN (bearer, wins), PROBE_GIT_CA (else PROBE_GIT_CA_FILE): PEM bundle,
# trusted IN ADDITION to the image's system bundle, as go-git does. Their values are never
# printed; "#podresolve git-auth SCHEME" and "#podresolve git-ca SRC" (image, image+secret,
# secret = no system bundle in the image, unwritable) say which were used.
# HTTP(S) requests follow the hosts as groups of five elements: --http URL VIA TARGET SNI.
# VIA is "-" (curl resolves URL's host as any client would) or the value of curl's
# --connect-to (HOST1:PORT1:HOST2:PORT2: send the request, Host header and SNI unchanged, to
# HOST2:PORT2). TARGET is "-" (plain HTTP) or ADDR:PORT for openssl's certificate facts, SNI the
# name openssl sends and checks ("-" for none). Each request is a "section http URL" (curl's
# --write-out line "#http ...", its error line, exit status = curl's), then for HTTPS a
# "section http-tls URL" (openssl s_client: verify result, leaf subject, issuer, notAfter,
# subjectAltName). curl judges the chain, name and dates as the client does (the image's CA
# bundle); when it refuses the certificate, a second request with -k says what the server would
# have answered ("#http-insecure ..." line). No redirect is followed: the first answer counts.
m='#podresolve'
GIT_TERMINAL_PROMPT=0; export GIT_TERMINAL_PROMPT
tls_port=''
git_url=''
git_ref='HEAD'
step=''
while [ "$#" -gt 0 ]; do
  case "$1" in
    --step-timeout) step="$2"; shift 2 ;;
    --tls) tls_port="$2"; shift 2 ;;
    --git) git_url="$2"; shift 2 ;;
    --git-ref) git_ref="$2"; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
# Bound each tool when a working `timeout` exists (coreutils and BusyBox >= 1.30 share the
# `timeout SECS CMD` form); ephemeral containers have no activeDeadlineSeconds.
if [ -n "$step" ] && timeout 5 true >/dev/null 2>&1; then
  t() { timeout "$step" "$@"; }
else
  t() { "$@"; }
fi
printf '%s begin v1\n' "$m"
for tool in getent nslookup openssl git curl; do
  p=$(command -v "$tool" 2>/dev/null) || p=''
  r=''
  [ -n "$p" ] && r=$(readlink -f "$p" 2>/dev/null)
  printf '%s tool %s %s %s\n' "$m" "$tool" "${p:--}" "${r:--}"
done
# The image's C library, from its getent (else its sh) binary, never from an answer: musl
# binaries name the ld-musl-* loader, glibc ones need GLIBC_2.* symbol versions.
libc=unknown
for b in "$(command -v getent 2>/dev/null)" /bin/sh; do
  [ -n "$b" ] || continue
  f=$(readlink -f "$b" 2>/dev/null) || f="$b"
  if grep -q 'ld-musl-' "$f" 2>/dev/null; then libc=musl; break; fi
  if grep -q 'GLIBC_2[.]' "$f" 2>/dev/null; then libc=glibc; break; fi
done
printf '%s libc %s\n' "$m" "$libc"
printf '%s section resolv.conf\n' "$m"
cat /etc/resolv.conf 2>&1
printf '%s end rc=%s\n' "$m" "$?"
printf '%s section hosts\n' "$m"
cat /etc/hosts 2>&1
printf '%s end rc=%s\n' "$m" "$?"
while [ "$#" -gt 0 ] && [ "$1" != '--http' ]; do
  h="$1"; shift
  printf '%s section getent %s\n' "$m" "$h"
  if command -v getent >/dev/null 2>&1; then t getent ahosts "$h" 2>&1; rc=$?; else echo 'getent: not found in image'; rc=127; fi
  printf '%s end rc=%s\n' "$m" "$rc"
  printf '%s section nslookup %s\n' "$m" "$h"
  if command -v nslookup >/dev/null 2>&1; then t nslookup "$h" 2>&1; rc=$?; else echo 'nslookup: not found in image'; rc=127; fi
  printf '%s end rc=%s\n' "$m" "$rc"
  if [ -n "$tls_port" ]; then
    printf '%s section tls %s\n' "$m" "$h"
    if command -v openssl >/dev/null 2>&1; then
      case "$h" in *:*) target="[$h]:$tls_port" ;; *) target="$h:$tls_port" ;; esac
      out=$(t openssl s_client -connect "$target" -servername "$h" </dev/null 2>&1); rc=$?
      printf '%s\n' "$out" | grep -E '^(Verify return code|Verification)'
      case "$out" in
        *'BEGIN CERTIFICATE'*) printf '%s\n' "$out" | openssl x509 -noout -subject -issuer -enddate 2>&1 ;;
      esac
      printf '%s\n' "$out" | grep -iE 'errno=|connect error|refused|no route|not known|timed out|handshake failure|alert' | head -n 5
    else echo 'openssl: not found in image'; rc=127; fi
    printf '%s end rc=%s\n' "$m" "$rc"
  fi
done
# curl's own bound stays under the step timeout, so its error line is printed, not cut.
ht=20
[ -n "$step" ] && [ "$step" -gt 2 ] && ht=$((step - 1))
wfmt='\n#http code=%{http_code} version=%{http_version} remote=%{remote_ip} port=%{remote_port} connect=%{time_connect} tls=%{time_appconnect} total=%{time_total} verify=%{ssl_verify_result}\n'
http_get() {
  u="$1"; v="$2"; f="$3"; shift 3
  if [ "$v" = - ]; then
    t curl -sS -o /dev/null --proto '=http,https' --max-time "$ht" -w "$f" "$@" -- "$u" 2>&1
  else
    t curl -sS -o /dev/null --proto '=http,https' --max-time "$ht" --connect-to "$v" -w "$f" "$@" -- "$u" 2>&1
  fi
}
while [ "$#" -ge 5 ] && [ "$1" = '--http' ]; do
  url="$2"; via="$3"; target="$4"; sni="$5"; shift 5
  printf '%s section http %s\n' "$m" "$url"
  if command -v curl >/dev/null 2>&1; then
    http_get "$url" "$via" "$wfmt"; rc=$?
    case "$rc" in
      35|51|58|60|77|83|90|91)
        http_get "$url" "$via" "$(printf '%s' "$wfmt" | sed 's/#http /#http-insecure /')" -k ;;
    esac
  else echo 'curl: not found in image'; rc=127; fi
  printf '%s end rc=%s\n' "$m" "$rc"
  if [ "$target" != - ]; then
    printf '%s section http-tls %s\n' "$m" "$url"
    if command -v openssl >/dev/null 2>&1; then
      if [ "$sni" = - ]; then
        out=$(t openssl s_client -connect "$target" </dev/null 2>&1); rc=$?
      else
        out=$(t openssl s_client -connect "$target" -servername "$sni" -verify_hostname "$sni" </dev/null 2>&1); rc=$?
      fi
      printf '%s\n' "$out" | grep -E '^(Verify return code|Verification)'
      case "$out" in
        *'BEGIN CERTIFICATE'*) printf '%s\n' "$out" | openssl x509 -noout -subject -issuer -enddate -ext subjectAltName 2>&1 ;;
      esac
      printf '%s\n' "$out" | grep -iE 'errno=|connect error|refused|no route|not known|timed out|handshake failure|alert' | head -n 5
    else echo 'openssl: not found in image'; rc=127; fi
    printf '%s end rc=%s\n' "$m" "$rc"
  fi
done
if [ -n "$git_url" ]; then
  auth=none
  if [ -n "${PROBE_GIT_BEARER_TOKEN:-}" ]; then
    auth=bearer
    GIT_CONFIG_COUNT=1; GIT_CONFIG_KEY_0=http.extraHeader
    GIT_CONFIG_VALUE_0="Authorization: Bearer $PROBE_GIT_BEARER_TOKEN"
    export GIT_CONFIG_COUNT GIT_CONFIG_KEY_0 GIT_CONFIG_VALUE_0
  elif [ -n "${PROBE_GIT_USERNAME:-}${PROBE_GIT_PASSWORD:-}" ]; then
    if command -v base64 >/dev/null 2>&1; then
      auth=basic
      GIT_CONFIG_COUNT=1; GIT_CONFIG_KEY_0=http.extraHeader
      GIT_CONFIG_VALUE_0="Authorization: Basic $(printf '%s:%s' "${PROBE_GIT_USERNAME:-}" "${PROBE_GIT_PASSWORD:-}" | base64 | tr -d '\n')"
      export GIT_CONFIG_COUNT GIT_CONFIG_KEY_0 GIT_CONFIG_VALUE_0
    else auth=basic-unavailable-no-base64; fi
  fi
  printf '%s git-auth %s\n' "$m" "$auth"
  ca="${PROBE_GIT_CA:-${PROBE_GIT_CA_FILE:-}}"
  if [ -n "$ca" ]; then
    # go-git v5 configureTransport ADDS the CA to the system pool (x509.SystemCertPool, else an
    # empty pool): copy the image's bundle (Go crypto/x509 root_linux.go order, SSL_CERT_FILE
    # first) and append the CA; GIT_SSL_CAINFO then means "system + ca.crt", not "ca.crt only".
    sys=''
    for c in "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/ca-bundle.pem /etc/pki/tls/cacert.pem /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem /etc/ssl/cert.pem; do
      if [ -n "$c" ] && [ -r "$c" ] && [ -s "$c" ]; then sys="$c"; break; fi
    done
    src=secret
    if f=$(mktemp 2>/dev/null); then
      if [ -n "$sys" ] && cat "$sys" >"$f" 2>/dev/null; then src=image+secret; else : >"$f"; fi
      if printf '\n%s\n' "$ca" >>"$f" 2>/dev/null || { src=secret; printf '%s\n' "$ca" >"$f" 2>/dev/null; }; then
        GIT_SSL_CAINFO="$f"; export GIT_SSL_CAINFO; printf '%s git-ca %s\n' "$m" "$src"
      else printf '%s git-ca unwritable\n' "$m"; fi
    else printf '%s git-ca unwritable\n' "$m"; fi
  else
    printf '%s git-ca image\n' "$m"
  fi
  printf '%s section git %s\n' "$m" "$git_url"
  if command -v git >/dev/null 2>&1; then t git ls-remote -- "$git_url" "$git_ref" 2>&1; rc=$?; else echo 'git: not found in image'; rc=127; fi
  printf '%s end rc=%s\n' "$m" "$rc"
fi
printf '%s done\n' "$m"
