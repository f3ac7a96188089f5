// Command etcd runs a single-member etcd (go.etcd.io/etcd/server/v3/embed)
// for the test environment's kube-apiserver: one data directory, one client
// URL on loopback, no peers.
//
//	etcd --data-dir DIR --listen-client-urls http://127.0.0.1:PORT
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory (required)")
	client := flag.String("listen-client-urls", "", "client URL, e.g. http://127.0.0.1:2379 (required)")
	peer := flag.String("listen-peer-urls", "http://127.0.0.1:0", "peer URL (one member: never dialled)")
	flag.Parse()
	if *dataDir == "" || *client == "" {
		fmt.Fprintln(os.Stderr, "usage: etcd --data-dir DIR --listen-client-urls URL [--listen-peer-urls URL]")
		os.Exit(2)
	}
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatalf("--listen-client-urls: %v", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatalf("--listen-peer-urls: %v", err)
	}

	cfg := embed.NewConfig()
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// etcd logs every request at warn level; errors only.
	cfg.LogLevel = "error"
	// A test store: no fsync per write (the data dir is thrown away).
	cfg.UnsafeNoFsync = true

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: %v", err)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	log.Printf("etcd ready on %s", cu)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	case <-sig:
	}
}
