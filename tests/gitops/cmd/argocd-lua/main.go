// Command argocd-lua runs an Argo CD resource customization script with gopher-lua, the
// interpreter Argo CD embeds, in the environment Argo CD gives scripts from argocd-cm (the base,
// package and table libraries; no string, io or full os library), with the object read as JSON
// on stdin bound to the global `obj`. It prints the table the script returns as JSON:
//
//	argocd-lua health.lua < object.json                 {"status": "Healthy", "message": "..."}
//	argocd-lua actions/discovery.lua < object.json      {"restore": {"disabled": false}}
//	argocd-lua actions/restore/action.lua < object.json the object, or [{"operation": ..., "resource": ...}]
//
// A table with keys 1..n is a JSON array, any other non-empty table an object, and an empty
// table an empty array, as Argo CD's encoder has it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	lua "github.com/yuin/gopher-lua"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: argocd-lua SCRIPT.lua < object.json")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "argocd-lua:", err)
		os.Exit(1)
	}
}

func run(path string, in io.Reader, out io.Writer) error {
	script, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var object any
	if err := json.NewDecoder(in).Decode(&object); err != nil {
		return fmt.Errorf("reading the object: %w", err)
	}
	state := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer state.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage,
		lua.BaseLibName: lua.OpenBase,
		lua.TabLibName:  lua.OpenTable,
	} {
		if err := state.CallByParam(lua.P{Fn: state.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	state.SetContext(ctx)
	state.SetGlobal("obj", toLua(state, object))
	if err := state.DoString(string(script)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	returned, ok := state.Get(-1).(*lua.LTable)
	if !ok {
		return fmt.Errorf("%s returned %s, not a table", path, state.Get(-1).Type())
	}
	return json.NewEncoder(out).Encode(fromLua(returned))
}

func toLua(state *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		table := state.CreateTable(len(v), 0)
		for _, item := range v {
			table.Append(toLua(state, item))
		}
		return table
	case map[string]any:
		table := state.CreateTable(0, len(v))
		for key, item := range v {
			table.RawSetString(key, toLua(state, item))
		}
		return table
	}
	return lua.LNil
}

func fromLua(value lua.LValue) any {
	switch v := value.(type) {
	case lua.LBool:
		return bool(v)
	case lua.LNumber:
		return float64(v)
	case lua.LString:
		return string(v)
	case *lua.LTable:
		if n := v.MaxN(); n > 0 {
			items := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				items = append(items, fromLua(v.RawGetInt(i)))
			}
			return items
		}
		fields := map[string]any{}
		v.ForEach(func(key, item lua.LValue) { fields[key.String()] = fromLua(item) })
		if len(fields) == 0 {
			return []any{}
		}
		return fields
	}
	return nil
}
