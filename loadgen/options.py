"""embedperf's Locust options as the web UI shows them: choices for selects, the --set text field."""

from __future__ import annotations

from scenarios.loader import load_scenario, shipped_scenarios


class Suggestions(list[str]):
    """Choices the web UI offers in a select; on the command line any value passes argparse and the
    scenario loader validates it (a YAML path works, a misspelt name gets a "did you mean")."""

    def __contains__(self, value: object) -> bool:
        return True


def scenario_choices(default_scenario: str) -> Suggestions:
    """Shipped scenarios this locustfile can run (closed-loop files cannot run open-loop scenarios)."""
    open_loop = load_scenario(default_scenario).is_open_loop
    names = [n for n in shipped_scenarios() if load_scenario(n).is_open_loop == open_loop]
    return Suggestions(names if default_scenario in names else [default_scenario, *names])



def rejoin_overrides(items: list[str]) -> list[str]:
    """--set values; the web UI splits its text field at commas, so pieces without `=` are rejoined."""
    out: list[str] = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if "=" not in item.split("[", 1)[0] and out:
            out[-1] += "," + item
        else:
            out.append(item)
    return out
