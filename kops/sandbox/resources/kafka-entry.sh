#!/bin/sh
# kops sandbox image: run ZooKeeper or a Kafka broker configured from the environment, for
# docker/compose.yml and anyone running the image by hand (kops' own sandbox passes a full
# command line instead and does not use this script).
#
#   kafka-entry zookeeper        ZooKeeper on $ZOOKEEPER_PORT (2181), data in /var/lib/zookeeper
#   kafka-entry broker           a broker: every KAFKA_CFG_X_Y=v becomes x.y=v in server.properties
#                                (KAFKA_CFG_BROKER_RACK=a -> broker.rack=a), data in /var/lib/kafka
#
# $HEAP sets -Xmx (default 384m brokers, 128m ZooKeeper); logs go to /var/log/kafka.
set -eu
role=${1:-broker}
mkdir -p /etc/kafka /var/log/kafka
jvm="java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData -Djava.awt.headless=true
     -Djava.net.preferIPv4Stack=true -Dkafka.logs.dir=/var/log/kafka
     -Dlog4j.configuration=file:/opt/kops/log4j.properties -Dkops.state.change.level=INFO"
case "$role" in
  zookeeper)
    mkdir -p /var/lib/zookeeper
    cat > /etc/kafka/zookeeper.properties <<PROPS
dataDir=/var/lib/zookeeper
clientPort=${ZOOKEEPER_PORT:-2181}
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
tickTime=2000
PROPS
    # shellcheck disable=SC2086
    exec $jvm -Xmx"${HEAP:-128m}" -cp "$KAFKA_LIBS/*" org.apache.zookeeper.server.quorum.QuorumPeerMain \
      /etc/kafka/zookeeper.properties
    ;;
  broker)
    mkdir -p /var/lib/kafka/data
    {
      echo "log.dirs=/var/lib/kafka/data"
      env | grep '^KAFKA_CFG_' | sed 's/^KAFKA_CFG_//' | while IFS='=' read -r key value; do
        printf '%s=%s\n' "$(printf '%s' "$key" | tr 'A-Z_' 'a-z.')" "$value"
      done
    } > /etc/kafka/server.properties
    # shellcheck disable=SC2086
    exec $jvm -Xmx"${HEAP:-384m}" -cp "$KAFKA_LIBS/*" kafka.Kafka /etc/kafka/server.properties
    ;;
  *)
    echo "usage: kafka-entry zookeeper|broker" >&2
    exit 2
    ;;
esac
