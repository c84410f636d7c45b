// The Go peer of bench/loops.py: szpakas/fakepushprovider's FCM HTTP handler (its fcm and
// fcm/http packages, copied from a checkout by bench/loops.py) serving POST /fcm/send, its
// storage the bench's app and tokens in a map (the project's MemoryStorage finds a token by
// scanning every instance, 10,000 here). Prints `listening http=127.0.0.1:PORT`.
// Usage: peer TOKENS_FILE SERVER_KEY
package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/szpakas/fakepushprovider/fcm"
	fhttp "github.com/szpakas/fakepushprovider/fcm/http"
)

type storage struct {
	app       *fcm.App
	instances map[fcm.RegistrationID]*fcm.Instance
}

func (s *storage) AppFind(apiKey string) (*fcm.App, error) {
	if apiKey != s.app.ApiKey {
		return nil, fcm.ErrElementNotFound
	}
	return s.app, nil
}

func (s *storage) InstanceFind(appID string, id fcm.RegistrationID) (*fcm.Instance, error) {
	if i, ok := s.instances[id]; ok && appID == s.app.ID {
		return i, nil
	}
	return nil, fcm.ErrElementNotFound
}

func main() {
	s := &storage{app: &fcm.App{ID: "bench", SenderID: "424242424242", ApiKey: os.Args[2]},
		instances: map[fcm.RegistrationID]*fcm.Instance{}}
	f, err := os.Open(os.Args[1])
	if err != nil {
		panic(err)
	}
	for lines := bufio.NewScanner(f); lines.Scan(); {
		if t := fcm.RegistrationID(lines.Text()); t != "" {
			s.instances[t] = &fcm.Instance{ID: string(t), State: fcm.InstanceStateRegistered, App: s.app,
				RegistrationIDS: []fcm.RegistrationID{t}}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Printf("listening http=%s\n", ln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/fcm/send", fhttp.NewHandler(s))
	panic(http.Serve(ln, mux))
}
