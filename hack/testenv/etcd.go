package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

type etcdServer struct {
	URL    string
	server *embed.Etcd
}

func (e *etcdServer) Close() { e.server.Close() }

// startEtcd starts an embedded etcd 3.6 on free loopback ports. embed takes URLs rather than
// listeners, so a port taken between probing and binding is retried with fresh ports.
func startEtcd(dataDir string, logs io.Writer) (*etcdServer, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		clientPort, err := freePort()
		if err != nil {
			return nil, err
		}
		peerPort, err := freePort()
		if err != nil {
			return nil, err
		}
		clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
		peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}

		cfg := embed.NewConfig()
		cfg.Name = "testenv"
		cfg.Dir = dataDir
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		// A throwaway store: durability buys nothing and fsync costs seconds per test run.
		cfg.UnsafeNoFsync = true
		// The value Kubernetes uses; the apiserver's consistent reads from cache depend on it.
		cfg.WatchProgressNotifyInterval = 5 * time.Second
		cfg.LogLevel = "error"
		cfg.LogOutputs = []string{"stderr"}

		server, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			continue
		}
		select {
		case <-server.Server.ReadyNotify():
			fmt.Fprintf(logs, "etcd ready at %s\n", clientURL.String())
			return &etcdServer{URL: clientURL.String(), server: server}, nil
		case err := <-server.Err():
			server.Close()
			lastErr = err
		case <-time.After(60 * time.Second):
			server.Close()
			return nil, errors.New("etcd was not ready within 60s")
		}
	}
	return nil, fmt.Errorf("etcd did not start after 5 attempts: %w", lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
