// Command sperli launches Sperli jobs and runs rank programs (SPEC §2).
package main

import (
	"os"
)

func main() { os.Exit(doMain(os.Args[1:])) }
