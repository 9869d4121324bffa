extension ConsolePage {
    /// Readable from a phone's width up: cards stack, tables scroll inside their card.
    package static let style = #"""
    :root { color-scheme: light dark; --accent: #2f6fdf; --bad: #c0392b; --good: #1e8e3e; --line: #8884; }
    * { box-sizing: border-box; }
    body { margin: 0; font: 14px/1.4 system-ui, sans-serif; }
    header { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; padding: .6rem 1rem; border-bottom: 1px solid var(--line); }
    h1 { font-size: 1.1rem; margin: 0; }
    h2 { font-size: 1rem; margin: 0 0 .5rem; }
    h3 { font-size: .9rem; margin: .75rem 0 .25rem; }
    main { display: grid; gap: 1rem; padding: 1rem; grid-template-columns: repeat(auto-fit, minmax(min(100%, 28rem), 1fr)); }
    .card { border: 1px solid var(--line); border-radius: 8px; padding: .75rem; min-width: 0; overflow-x: auto; }
    #login { max-width: 28rem; margin: 2rem auto; }
    .badge { padding: .1rem .5rem; border-radius: 1rem; background: var(--line); }
    .badge.ok { background: var(--good); color: #fff; }
    .badge.bad { background: var(--bad); color: #fff; }
    .muted { opacity: .7; }
    .error { color: var(--bad); }
    .counter { font-size: 2rem; font-variant-numeric: tabular-nums; }
    canvas { width: 100%; height: 120px; display: block; }
    table { border-collapse: collapse; width: 100%; margin: .25rem 0 .5rem; }
    th, td { text-align: left; padding: .2rem .4rem; border-bottom: 1px solid var(--line); vertical-align: top; word-break: break-word; }
    th, thead td { word-break: normal; white-space: nowrap; font-weight: 600; }
    .number { text-align: right; font-variant-numeric: tabular-nums; }
    button.replay { white-space: nowrap; }
    form#filter { display: flex; flex-wrap: wrap; gap: .4rem; }
    form#filter input { flex: 1 1 10rem; min-width: 0; }
    input, select, button { font: inherit; padding: .25rem .4rem; }
    #tail { list-style: none; margin: .5rem 0 0; padding: 0; max-height: 22rem; overflow-y: auto; font-family: ui-monospace, monospace; font-size: 12px; }
    #tail li { padding: .15rem .3rem; border-bottom: 1px solid var(--line); cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
    #tail li:hover, #tail li.selected { background: #2f6fdf22; }
    .op-INSERT { color: var(--good); } .op-DELETE { color: var(--bad); } .op-UPDATE { color: var(--accent); }
    td.changed { background: #f1c40f44; font-weight: 600; }
    """#
}
