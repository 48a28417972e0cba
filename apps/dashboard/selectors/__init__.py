"""Page compositions: what each dashboard page shows, built from the selectors of the apps below (the same reads
as the API, so every figure is the API's for the same period, filters and visibility).

One module per page (`overview`, `workloads`, `workload`, `queues`, `fleet`, `showback`, `nodes`: the capacity
page's GPU nodes); `shared` holds what they all use (the usage report for the page's scope, links, status, filters,
tiles, table and chart rows), `history` the
periods before the page's and a figure's change against them. Each page function takes a `Scope` (period,
filters, signal, visibility) and returns a template context: tiles with their change vs the previous period and
the average, and `Block`s (chart, table, CSV of the same rows). Figures are typed (`apps.usage.figures`) until a
page turns them into rows; printing and change rules are the reports' (`apps.usage.figures`), periods the
reports' ISO weeks and months (`apps.reports.periods`).
"""
