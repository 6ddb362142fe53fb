#!/bin/sh
# Makes the Redis Cluster of docker-compose.yml's `cluster` profile, once (service
# redis-cluster-init). REDIS_CLUSTER_NODES is the comma list of host:port the Versus services
# get. Waits until every node answers PING, then:
#   - every node already knows all the others and all 16384 slots are assigned: nothing to do
#     (a later `up`; the nodes' volumes kept the cluster);
#   - every node is a fresh, empty cluster node: redis-cli --cluster create … --cluster-replicas 0;
#   - anything else (a half-made cluster, a node with data): prints each node's CLUSTER INFO and
#     exits 1, for an operator to look at; nothing is changed.
# Then waits until every node reports cluster_state:ok, so the services that depend on this one
# start against a working cluster. Exits 1 if that takes more than WAIT_SECONDS (default 60).
# Host names are resolved to addresses first: CLUSTER MEET, which --cluster create sends, takes
# IP addresses only.
# POSIX sh (busybox in redis:7-alpine); needs redis-cli, getent, awk.
set -eu

: "${REDIS_CLUSTER_NODES:?set REDIS_CLUSTER_NODES to a comma list of host:port}"
WAIT_SECONDS="${WAIT_SECONDS:-60}"
nodes=$(printf '%s' "$REDIS_CLUSTER_NODES" | tr ',' ' ')
count=$(printf '%s\n' $nodes | grep -c .)
deadline=$(( $(date +%s) + WAIT_SECONDS ))

say() { echo "redis-cluster-init: $*"; }
host() { printf '%s' "${1%:*}" | sed 's/^\[//; s/\]$//'; }
port() { printf '%s' "${1##*:}"; }
cli() { node=$1; shift; redis-cli -h "$(host "$node")" -p "$(port "$node")" "$@"; }
# One field of a node's CLUSTER INFO (empty when the node does not answer).
field() { cli "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"; }
in_time() { [ "$(date +%s)" -lt "$deadline" ]; }

for node in $nodes; do
  until [ "$(cli "$node" ping 2>/dev/null)" = PONG ]; do
    in_time || { say "$node does not answer PING after ${WAIT_SECONDS} s" >&2; exit 1; }
    sleep 1
  done
done

complete=0
fresh=0
for node in $nodes; do
  slots=$(field "$node" cluster_slots_assigned)
  known=$(field "$node" cluster_known_nodes)
  keys=$(cli "$node" dbsize 2>/dev/null)
  if [ "$slots" = 16384 ] && [ "$known" = "$count" ]; then complete=$((complete + 1)); fi
  if [ "$slots" = 0 ] && [ "$known" = 1 ] && [ "$keys" = 0 ]; then fresh=$((fresh + 1)); fi
done

if [ "$complete" = "$count" ]; then
  say "the cluster of $count nodes exists already; nothing to create"
elif [ "$fresh" = "$count" ]; then
  addresses=""
  for node in $nodes; do
    name=$(host "$node")
    address=$(getent hosts "$name" | awk 'NR == 1 { print $1 }')
    [ -n "$address" ] || { say "cannot resolve $name" >&2; exit 1; }
    addresses="$addresses $address:$(port "$node")"
  done
  say "creating a cluster of$addresses"
  # $addresses is split into one argument per node on purpose.
  # shellcheck disable=SC2086
  redis-cli --cluster create $addresses --cluster-replicas 0 --cluster-yes
else
  say "the nodes are neither all fresh nor one complete cluster; not touching them:" >&2
  for node in $nodes; do
    echo "--- $node" >&2
    cli "$node" cluster info 2>&1 | tr -d '\r' | grep -E '^cluster_(state|slots_assigned|known_nodes|size):' >&2 || true
    echo "keys: $(cli "$node" dbsize 2>&1)" >&2
  done
  exit 1
fi

for node in $nodes; do
  until [ "$(field "$node" cluster_state)" = ok ] && [ "$(field "$node" cluster_known_nodes)" = "$count" ]; do
    in_time || { say "$node: cluster_state is not ok after ${WAIT_SECONDS} s" >&2; exit 1; }
    sleep 1
  done
done
say "cluster_state:ok on all $count nodes"
