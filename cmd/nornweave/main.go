// Command nornweave is the NornWeave server: email over REST behind a global
// send throttle. See the README for configuration.
package main

import (
	"context"
	"os"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
