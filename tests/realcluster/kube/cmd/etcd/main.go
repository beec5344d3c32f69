// Command etcd runs an embedded etcd server (go.etcd.io/etcd/server/v3/embed, at the version
// k8s.io/apiserver requires) for the test control plane: one member, client URL on loopback,
// data in --data-dir. It exits when the server stops or on SIGINT/SIGTERM.
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "etcd data directory (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL on loopback")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL on loopback")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("--data-dir is required")
	}
	cu, err := url.Parse(*clientURL)
	if err != nil {
		log.Fatalf("--listen-client-url: %v", err)
	}
	pu, err := url.Parse(*peerURL)
	if err != nil {
		log.Fatalf("--listen-peer-url: %v", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.Name = "test"
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "warn"
	// Test data: no fsync per write (etcd's --unsafe-no-fsync), so a 2-core machine keeps up.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("start etcd: %v", err)
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd ready on %s", cu)
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
	select {
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	case <-sig:
	}
}
