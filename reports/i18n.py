"""Every user-visible string of the reports, in English and Chinese. Templates and figures look up keys here."""

from __future__ import annotations

from typing import Any

from embedperf.verdicts import VERDICT_TEXT
from reports.i18n_canary import CANARY_CATALOGUE
from reports.i18n_compare import COMPARE_CATALOGUE
from reports.i18n_plan import PLAN_CATALOGUE

LANGS: tuple[str, ...] = ("en", "zh")

# key -> (English, Chinese). Parameters use str.format names.
CATALOGUE: dict[str, tuple[str, str]] = {
    "report_title": ("Load test report", "压测报告"),
    "compare_title": ("Run comparison", "运行对比"),
    "run": ("Run", "运行"),
    "scenario": ("Scenario", "场景"),
    "target": ("Target", "目标地址"),
    "model": ("Model", "模型"),
    "device": ("Device", "设备"),
    "precision": ("Precision", "精度"),
    "devices_in_run": ("{n} device(s) in the telemetry", "遥测中共 {n} 个设备"),
    "service_config": ("Service configuration", "服务配置"),
    "show": ("show", "展开"),
    "host": ("Host", "主机"),
    "versions": ("Versions", "版本"),
    "git": ("Git", "Git"),
    "run_window": ("Run window (UTC)", "运行时间窗 (UTC)"),
    "slo": ("SLO", "SLO"),
    "slo_verdict": ("SLO verdict", "SLO 结论"),
    "verdict_pass": ("met at every step", "所有负载阶梯均满足"),
    "verdict_partial": ("met at some steps only", "仅部分阶梯满足"),
    "verdict_fail": ("not met at any step", "所有阶梯均不满足"),
    "verdict_no_verdict": ("no verdict: no SLO given (pass --slo-p99-ms)", "无结论：未设定 SLO（可用 --slo-p99-ms 指定）"),
    "slo_text": ("P99 ≤ {p99} ms, error rate ≤ {budget}", "P99 ≤ {p99} ms，错误率 ≤ {budget}"),
    "incomplete_banner": (
        "This run is incomplete (it crashed or is still running): figures cover the rows recorded so far.",
        "本次运行不完整（崩溃或仍在运行）：图表仅覆盖已记录的数据。",
    ),
    "steps": ("Per load step (steady state, warm-up trimmed)", "各负载阶梯（稳态，已剔除预热）"),
    "step": ("Step", "阶梯"),
    "users": ("Users", "并发用户"),
    "rate": ("Rate (req/s)", "速率 (req/s)"),
    "load": ("Load", "负载"),
    "requests": ("Requests", "请求数"),
    "qps": ("Goodput (req/s)", "有效吞吐 (req/s)"),
    "error_rate": ("Error rate", "错误率"),
    "unavailable_s": ("Unavailable (s)", "不可用 (秒)"),
    "unavailable_note": (
        "Unavailable: seconds of the steady window without a successful answer (closed loop: every such "
        "second; open loop: those in which requests failed or hung).",
        "不可用：稳态时间窗内没有任何成功应答的秒数（闭环：所有此类秒；开环：有请求失败或挂起的秒）。",
    ),
    "errors": ("Errors", "错误"),
    "timeouts": ("Timeouts", "超时"),
    "mean": ("Mean", "均值"),
    "max": ("Max", "最大"),
    "p99_ci": ("P99 95% CI", "P99 95% 置信区间"),
    "latency_ms": ("Latency (ms)", "延迟 (ms)"),
    "percentile_note": (
        "Latency percentiles are exact, computed from every ok request with numpy.percentile "
        "(method '{method}'); errors and timeouts are counted separately. The P99 confidence interval is a "
        "seeded bootstrap (2000 resamples) of the nearest-rank P99. Validation probes (endpoint 'validation*') "
        "are expected to fail and are excluded from the error rate.",
        "延迟分位数为精确值：对每个成功请求用 numpy.percentile（方法 '{method}'）计算；错误与超时单独统计。"
        "P99 置信区间为固定种子的自助法（2000 次重采样，最近秩 P99）。校验探针（endpoint 以 'validation' 开头）"
        "预期失败，不计入错误率。",
    ),
    "server_stages": (
        "Server stages and batching (ok rows, mean ms)",
        "服务端阶段与批处理（成功请求，均值 ms）",
    ),
    "queue": ("Queue", "排队"),
    "tokenize": ("Tokenise", "分词"),
    "compute": ("Device compute", "设备计算"),
    "post": ("Post-processing", "后处理"),
    "server_total": ("Server total", "服务端合计"),
    "client_network": ("Client and network", "客户端与网络"),
    "server_other": ("Server other", "服务端其他"),
    "batch_size_mean": ("Batch size (mean)", "批大小（均值）"),
    "batch_size_max": ("Batch size (max)", "批大小（最大）"),
    "decomposition": ("Latency decomposition (mean ms and share of total)", "延迟分解（均值 ms 与占比）"),
    "decomposition_note": (
        "Measured from the Server-Timing header of ok requests; client and network = client latency − server "
        "total. The parts sum to the mean latency.",
        "依据成功请求的 Server-Timing 头测得；客户端与网络 = 客户端延迟 − 服务端合计。各部分之和等于平均延迟。",
    ),
    "no_server_timing": ("The target sent no Server-Timing header.", "目标服务未返回 Server-Timing 头。"),
    "total": ("Total", "合计"),
    "telemetry": ("Telemetry per step (steady window)", "各阶梯遥测（稳态时间窗）"),
    "device_util": ("Device util. mean / max (%)", "设备利用率 均值/最大 (%)"),
    "mem_bw": ("Memory bandwidth util. (%)", "内存带宽利用率 (%)"),
    "temp_max": ("Temperature max (°C)", "最高温度 (°C)"),
    "power_mean": ("Power mean per device (W)", "单卡平均功耗 (W)"),
    "mem_used": ("Device memory max (MB / %)", "设备内存最大 (MB / %)"),
    "generator_cpu": ("Generator CPU mean (%)", "压测机 CPU 均值 (%)"),
    "service_cpu": ("Service CPU mean (%)", "服务 CPU 均值 (%)"),
    "service_busy": (
        "Inference worker busy mean / max (%) — device utilisation as the service measures it",
        "推理线程忙碌 均值 / 最大 (%) — 服务自测的设备利用率",
    ),
    "open_loop": ("Open loop: latency from intended send time", "开环：自计划发送时刻起的延迟"),
    "open_loop_note": (
        "Measured from when each request was scheduled, so a generator or server stall counts against latency "
        "(free of coordinated omission).",
        "从每个请求的计划发送时刻计时，压测机或服务端的停顿都计入延迟（无协同遗漏）。",
    ),
    "late": ("Late (>10 ms)", "延迟发送 (>10 ms)"),
    "lateness_p99": ("Lateness P99 (ms)", "发送滞后 P99 (ms)"),
    "dropped": ("Never sent", "未发送"),
    "figures": ("Figures", "图表"),
    "capacity": ("Capacity", "容量"),
    "max_qps_slo": ("Highest QPS meeting the SLO", "满足 SLO 的最高 QPS"),
    "at_load": ("at load {load}", "对应负载 {load}"),
    "none_meets": ("no step meets the SLO", "没有阶梯满足 SLO"),
    "knee": ("Knee", "拐点"),
    "knee_rule": (
        "Knee rule: the first step after which the next step adds less than 10% throughput while its P99 rises "
        "more than 20%.",
        "拐点规则：从该阶梯到下一阶梯，吞吐增长不足 10%，而 P99 上升超过 20%。",
    ),
    "knee_not_reached": ("not reached in the tested range", "测试范围内未出现"),
    "peak_qps": ("Peak QPS", "峰值 QPS"),
    "little": ("Little's law check (closed loop)", "Little 定律校验（闭环）"),
    "little_note": (
        "users ≈ answers per second × (mean latency + think time); a mismatch above {tol} suggests the load "
        "generator (or the think time), not the service, limited the load.",
        "用户数 ≈ 每秒应答数 ×（平均延迟 + 思考时间）；偏差超过 {tol} 说明压测机（或思考时间）而非服务限制了负载。",
    ),
    "expected_users": ("QPS × latency", "QPS × 延迟"),
    "mismatch": ("Mismatch", "偏差"),
    "flagged": ("generator bottleneck?", "压测机瓶颈？"),
    "consistent": ("consistent", "一致"),
    "devices_needed": ("Devices for a target", "目标所需设备数"),
    "plan_text": (
        "For {target} QPS with {headroom} headroom: {replicas} replica(s) of this configuration "
        "({devices_per} device(s) each) = {devices} device(s), assuming {usable} usable QPS per replica.",
        "目标 {target} QPS、预留 {headroom} 余量：需要本配置 {replicas} 个副本（每个 {devices_per} 张卡），"
        "共 {devices} 张卡；按每副本可用 {usable} QPS 计算。",
    ),
    "plan_text_at_most": (
        "For {target} QPS with {headroom} headroom: at most {replicas} replica(s) of this configuration "
        "({devices_per} device(s) each) = at most {devices} device(s), assuming {usable} usable QPS per replica; "
        "at most, because the capacity is a lower bound (the ramp never reached the limit).",
        "目标 {target} QPS、预留 {headroom} 余量：最多需要本配置 {replicas} 个副本（每个 {devices_per} 张卡），"
        "最多共 {devices} 张卡；按每副本可用 {usable} QPS 计算。之所以是“最多”，是因为容量只是下限（压测未触及极限）。",
    ),
    "plan_hint": (
        "Run `embedperf capacity RUN --target-qps N --headroom-pct 25` for the devices needed for a target.",
        "运行 `embedperf capacity RUN --target-qps N --headroom-pct 25` 计算目标所需设备数。",
    ),
    "health": ("Health checks per step", "各阶梯健康检查"),
    "health_temp_c": ("Temperature < {limit} °C", "温度 < {limit} °C"),
    "health_mem_pct": ("Device memory < {limit}%", "设备内存 < {limit}%"),
    "health_error_rate": ("Error rate < {limit}", "错误率 < {limit}"),
    "health_mean_latency_ms": ("Mean latency < {limit} ms", "平均延迟 < {limit} ms"),
    "status_pass": ("pass", "通过"),
    "status_warn": ("warn", "警告"),
    "status_n/a": ("n/a", "无数据"),
    "soak": ("Soak trends", "长稳趋势"),
    "soak_p50_slope": ("P50 drift (ms/h)", "P50 漂移 (ms/h)"),
    "soak_p99_slope": ("P99 drift (ms/h)", "P99 漂移 (ms/h)"),
    "soak_error": ("Error rate first / second half", "前半程 / 后半程错误率"),
    "soak_rss": ("Service memory slope (MB/h)", "服务内存增长 (MB/h)"),
    "soak_verdict": ("Verdict", "结论"),
    "soak_stable": ("stable", "稳定"),
    "soak_degrading": ("degrading", "劣化"),
    "soak_minutes": ("Per-minute findings", "每分钟序列结论"),
    "soak_of_median": ("(median P99 {median} ms)", "（P99 中位数 {median} ms）"),
    "soak_rss_mean": ("(mean {mean} MB)", "（均值 {mean} MB）"),
    "soak_throttling": ("Thermal throttling", "热降频"),
    "soak_throttle_values": (
        "temperature {temp} °C, clock {clock}, power {power} (last quarter vs first)",
        "温度 {temp} °C，频率 {clock}，功耗 {power}（末四分之一对比首四分之一）",
    ),
    "soak_no_telemetry": (
        "not measured (no temperature, clock or power telemetry)",
        "未测量（没有温度、频率或功耗遥测）",
    ),
    "soak_minutes_note": (
        "From the per-minute series of the steady requests and the serving devices. Flagged: P99 rising by more "
        "than {drift}% of its median per hour; service memory growing by more than {leak_mb} MB/h and "
        "{leak_pct}% of its mean per hour; thermal throttling when the last quarter of the run is at least "
        "{temp} °C hotter than the first while clock or power is at least {drop}% lower.",
        "依据稳态请求与服务设备的每分钟序列。标记规则：P99 每小时上升超过其中位数的 {drift}%；服务内存每小时增长超过 "
        "{leak_mb} MB 且超过其均值的 {leak_pct}%；运行末四分之一比首四分之一温度高 {temp} °C 及以上，同时频率或功耗"
        "下降 {drop}% 及以上，判为热降频。",
    ),
    "quality": ("Data quality", "数据质量"),
    "quality_ok": ("No data-quality problems found.", "未发现数据质量问题。"),
    "f_incomplete_run": (
        "The run is incomplete (manifest complete = false).",
        "运行不完整（manifest complete = false）。",
    ),
    "f_serving_busy": (
        "Serving devices found by their load (no --devices, and the target's /info lists none): {devices}; "
        "{idle} other device(s) stayed idle. Device figures and the capacity plan count the serving devices.",
        "按负载识别的服务设备（未指定 --devices，目标 /info 也未列出）：{devices}；其余 {idle} 个设备空闲。"
        "设备指标与容量规划只统计服务设备。",
    ),
    "f_serving_not_seen": (
        "The serving devices ({indices}) are not in the telemetry, which has {seen}: no device figures are "
        "shown. Check --devices (indices as npu-smi / NVML print them) or --npu-ids.",
        "服务设备（{indices}）不在遥测数据中（遥测只有 {seen}）：不显示设备指标。请检查 --devices"
        "（按 npu-smi / NVML 的编号）或 --npu-ids。",
    ),
    "f_serving_unknown": (
        "Which of the {n} devices serve the target is unknown (none busier than the others under load): "
        "device figures cover all of them. Pass --devices to name the serving ones.",
        "无法确定 {n} 个设备中哪些在服务目标（负载下没有设备明显更忙）：设备指标按全部设备统计。"
        "请用 --devices 指定服务设备。",
    ),
    "f_agent_clock_offset": (
        "The clock of agent {host} is {offset_ms} ms off this host's (± {uncertainty_ms} ms); its samples "
        "were shifted onto this host's clock, but check NTP on both hosts.",
        "代理 {host} 的时钟与本机相差 {offset_ms} ms（± {uncertainty_ms} ms）；其样本已换算到本机时钟，"
        "但请检查两台主机的 NTP。",
    ),
    "f_agent_gap": (
        "Agent {host} sent no samples for {missing_s} s of the run (unix seconds {seconds}).",
        "代理 {host} 在运行中有 {missing_s} 秒没有样本（unix 秒 {seconds}）。",
    ),
    "f_generator_saturated": (
        "The load generator was CPU-saturated (max {max_pct}% ≥ {threshold_pct}%): latency and QPS may be "
        "limited by the generator, not the service.",
        "压测机 CPU 饱和（最高 {max_pct}% ≥ {threshold_pct}%）：延迟与 QPS 可能受压测机限制，而非服务。",
    ),
    "f_shared_host": (
        "The load generator shares this host with the service (generator CPU mean {mean_pct}%): figures are "
        "for this host and configuration only, not universal.",
        "压测机与服务共用本主机（压测机 CPU 均值 {mean_pct}%）：数据仅代表本主机与本配置，不具普适性。",
    ),
    "f_open_loop_late": (
        "Step {step}: {late} of {n} requests were sent more than 10 ms late ({dropped} never sent).",
        "阶梯 {step}：{n} 个请求中 {late} 个发送滞后超过 10 ms（{dropped} 个未发送）。",
    ),
    "f_no_samples": ("Step {step} has no requests.", "阶梯 {step} 没有请求。"),
    "f_few_samples_p99": (
        "Step {step} has only {n} ok samples: too few for a stable P99 (< 100).",
        "阶梯 {step} 仅有 {n} 个成功样本：不足以得到稳定的 P99（< 100）。",
    ),
    "f_few_samples_p999": (
        "Step {step} has only {n} ok samples: too few for a stable P99.9 (< 1000).",
        "阶梯 {step} 仅有 {n} 个成功样本：不足以得到稳定的 P99.9（< 1000）。",
    ),
    "f_collector_not_ok": (
        "Telemetry source {name}: {status} — {reason}",
        "遥测源 {name}：{status} — {reason}",
    ),
    "f_no_telemetry": (
        "No telemetry in this run: device and host columns are empty.",
        "本次运行没有遥测数据：设备与主机列为空。",
    ),
    "f_telemetry_gap": (
        "Telemetry source {source} is missing {missing_s} s.",
        "遥测源 {source} 缺失 {missing_s} 秒。",
    ),
    "f_dropped_outside_stage": (
        "{n} request rows fall outside every recorded stage and were left out.",
        "{n} 条请求记录不属于任何已记录阶梯，已剔除。",
    ),
    "f_dropped_null_latency": (
        "{n} ok request rows have no latency and were left out.",
        "{n} 条成功请求记录缺少延迟，已剔除。",
    ),
    "disclaimer": (
        "Figures measured on one host with one configuration; they are not universal. The load generator ran on "
        "the same host as the service unless the manifest says otherwise.",
        "数据来自单台主机与单一配置，不具普适性。除非 manifest 另有说明，压测机与服务运行在同一主机上。",
    ),
    "notes": ("Notes", "备注"),
    "warmup_trimmed": ("Warm-up rows trimmed", "已剔除预热请求"),
    "fig_percentiles": ("Latency percentiles vs load", "各负载下的延迟分位数"),
    "fig_throughput": ("Throughput vs load", "各负载下的吞吐"),
    "fig_timeseries": ("Time series (steps shaded)", "时间序列（阴影为负载阶梯）"),
    "fig_cdf": ("Latency CDF per step", "各阶梯延迟 CDF"),
    "fig_batch": ("Batch size distribution per step", "各阶梯批大小分布"),
    "fig_decomposition": ("Latency decomposition per step", "各阶梯延迟分解"),
    "fig_soak": (
        "Per-minute series (steady requests, serving devices)",
        "每分钟序列（稳态请求，服务设备）",
    ),
    "ax_time_s": ("Time since start (s)", "自开始以来的时间 (s)"),
    "ax_share": ("Share of requests", "请求占比"),
    "ax_batch": ("Batch size", "批大小"),
    "ax_cdf": ("Cumulative fraction", "累积比例"),
    "ax_device_util": ("Device util. %", "设备利用率 %"),
    "ax_mem_bw": ("Mem. BW %", "内存带宽 %"),
    "ax_temp": ("Temp. max °C", "最高温度 °C"),
    "ax_power": ("Power total W", "总功耗 W"),
    "ax_queue": ("Queue depth", "队列深度"),
    "ax_minute": ("Minute", "分钟"),
    "ax_req_per_s": ("Requests/s", "请求数/秒"),
    "ax_serving_util": ("Serving util. %", "服务设备利用率 %"),
    "ax_clock": ("Clock mean MHz", "平均频率 MHz"),
    "ax_service_rss": ("Service RSS MB", "服务进程 RSS MB"),
    "knee_label": ("knee", "拐点"),
    "slo_label": ("SLO", "SLO"),
    "yes": ("yes", "是"),
    "no": ("no", "否"),
    "meets_slo": ("Meets SLO", "满足 SLO"),
    "steps_detail": ("Latency and errors per step, in detail", "各阶梯延迟与错误明细"),
    "service_busy_short": ("Inference worker busy mean / max (%)", "推理线程忙碌 均值/最大 (%)"),
    "service_busy_note": (
        "Inference worker busy is the device utilisation as the service itself measures it.",
        "推理线程忙碌即服务自测的设备利用率。",
    ),
    "cpu_core_note": (
        "Process CPU (load generator, service) is a percentage of one core: 250% is two and a half cores "
        "busy, so it can exceed 100% and is not capped.",
        "进程 CPU（压测机、服务）以单核为 100%：250% 即占满两个半核，因此可以超过 100%，不做截断。",
    ),
    "capped_note": (
        "shown as 100%: a busy share summed over worker threads, or sampled over a window slightly shorter "
        "than the step, can read above 100%, but nothing is busier than fully busy.",
        "显示为 100%：按线程累加的忙碌比例、或采样窗口略短于阶梯时，读数可能超过 100%，但不可能比满负荷更忙。",
    ),
    "capped_measured": ("Measured", "实测值"),
    "cap_device_util": ("device utilisation", "设备利用率"),
    "cap_mem_bw": ("memory bandwidth utilisation", "内存带宽利用率"),
    "cap_service_busy": ("inference worker busy", "推理线程忙碌"),
    "config_diff": ("Configuration, baseline → candidate", "配置：基线 → 候选"),
    "same_config": ("same configuration", "配置相同"),
    # comparison
    "baseline": ("Baseline", "基线"),
    "candidate": ("Candidate", "候选"),
    "metric": ("Metric", "指标"),
    "change": ("Change", "变化"),
    "ci95": ("95% CI", "95% 置信区间"),
    "verdict": ("Verdict", "结论"),
    "better": VERDICT_TEXT["better"],
    "worse": VERDICT_TEXT["worse"],
    "no_difference": VERDICT_TEXT["no_difference"],
    "no_verdict": VERDICT_TEXT["no_verdict"],
    "overall": ("Overall", "总体"),
    "summary_table": ("Optimisation | QPS gain | resource saving", "优化项 | QPS 提升 | 资源节省"),
    "qps_gain": ("Goodput change", "有效吞吐变化"),
    "p99_change": ("P99 change", "P99 变化"),
    "overall_at": ("Overall = step", "总体 = 阶梯"),
    "overall_definition": (
        "Overall is the comparison at the highest load both runs share, for every metric (goodput, latency, "
        "errors, resources from the same requests). Rules are checked at every matched step; overall adds no "
        "rule of its own, so one regression is one failure.",
        "“总体”指两次运行共有的最高负载阶梯上的对比，所有指标均如此（有效吞吐、延迟、错误与资源来自同一批请求）。"
        "规则在每个匹配阶梯上检查；总体不另设规则，因此一次退化只报一次失败。",
    ),
    "resource_change": ("Device util. change", "设备利用率变化"),
    "cpu_change": ("Service CPU change", "服务 CPU 变化"),
    "mem_change": ("Device memory change", "设备内存变化"),
    "gate": ("Gate", "门禁"),
    "gate_rule": (
        "A gate fails when the point estimate crosses its threshold and the 95% confidence interval of the "
        "change excludes zero.",
        "当点估计越过阈值且变化量的 95% 置信区间不含 0 时，门禁失败。",
    ),
    "gate_pass": ("pass", "通过"),
    "gate_fail": ("FAIL", "失败"),
    "rule_held": ("held", "满足"),
    "mismatch_warning": (
        "The runs differ in {what}: the comparison may reflect the environment, not the change.",
        "两次运行的 {what} 不同：对比结果可能反映环境差异而非改动本身。",
    ),
    # optimisation matrix
    "matrix_title": ("Optimisation matrix", "优化矩阵"),
    "configuration": ("Configuration", "配置"),
    "description": ("Description", "说明"),
    "qps_at_slo": ("QPS at the SLO", "满足 SLO 的 QPS"),
    "change_vs_baseline": ("change vs baseline", "相对基线"),
    "precision_check": ("Precision (mean cosine vs fp32)", "精度（与 fp32 的平均余弦）"),
    "precision_reference": ("fp32 reference", "fp32 基准"),
    "recommendation": ("Recommendation", "推荐"),
    "recommend_text": (
        "{name}: the most QPS at the SLO ({qps} req/s) among configurations that pass the precision gate.",
        "{name}：在通过精度门禁的配置中，满足 SLO 时 QPS 最高（{qps} req/s）。",
    ),
    "recommend_peak_text": (
        "No configuration met the SLO at any step. Most QPS at a step within the error budget, among the "
        "configurations that passed the precision gate: {name} ({qps} req/s).",
        "没有配置在任何阶梯满足 SLO。通过精度门禁的配置中，错误率在预算内的阶梯最高 QPS：{name}（{qps} req/s）。",
    ),
    "recommend_none": (
        "No configuration completed, passed the precision gate and kept a step within the error budget.",
        "没有配置完成运行、通过精度门禁并有阶梯的错误率在预算内。",
    ),
    "precision_excluded": (
        "Failed the precision gate, so never recommended: {names}.",
        "未通过精度门禁，不予推荐：{names}。",
    ),
    "per_step_changes": ("P50 / P99 change at each load step", "各负载阶梯 P50 / P99 变化"),
    "repeat": ("repeat", "重复"),
    "repeats_note": (
        "Each configuration ran {n} time(s) in rotated order. A change is called better or worse only when every "
        "repeat's 95% CI agrees, and no difference only when every repeat's CI includes zero; repeats that "
        "disagree or cannot judge give no verdict.",
        "每个配置以轮换顺序运行 {n} 次。只有所有重复的 95% 置信区间一致时才判定更好或更差；所有重复的区间都包含零时为“无差异”；"
        "重复之间不一致或数据不足时为“无结论”。",
    ),
    "failed_runs": ("Runs that failed", "失败的运行"),
    "fig_matrix": ("Configurations overlaid", "各配置叠加对比"),
    "cache_hit_ratio": ("cache hit ratio", "缓存命中率"),
    "compare_note": (
        "Steps are matched by load (users or rate), never by position. Overall is the step at the highest load both runs "
        "share (pooling steps would mix loads). Changes are candidate − baseline; percentile CIs are a seeded "
        "bootstrap of the difference (2000 resamples), goodput CIs resample whole seconds of successful requests.",
        "阶梯按负载（用户数或速率）匹配，而非按位置。总体为两次运行共有的最高负载阶梯（混合所有阶梯会混淆负载）。变化量为 候选 − 基线；分位数置信区间为差值的固定种子自助法（2000 次），有效吞吐置信区间对每秒成功请求数重采样。",
    ),
    # headline and reviewer-facing additions
    "kind_closed_loop": ("closed loop", "闭环"),
    "kind_open_loop": ("open loop", "开环"),
    "kind_synthetic": ("synthetic", "合成数据"),
    "headline": ("Headline", "结论摘要"),
    "capacity_answer": (
        "{qps} req/s at P99 ≤ {p99} ms on {n} device(s)",
        "{n} 个设备上 P99 ≤ {p99} ms 时可承载 {qps} req/s",
    ),
    "capacity_answer_lower": (
        "at least {qps} req/s at P99 ≤ {p99} ms on {n} device(s)",
        "{n} 个设备上 P99 ≤ {p99} ms 时可承载至少 {qps} req/s",
    ),
    "capacity_lower_note": (
        "A lower bound: the ramp never reached the limit (no knee, and its highest load, step {step}, still "
        "met the SLO).",
        "这只是下限：压测未触及极限（未出现拐点，最高负载阶梯 {step} 仍满足 SLO）。",
    ),
    "capacity_lower_next": (
        "For the limit, rerun with more load (e.g. --set {override}) or run `embedperf search`.",
        "如需得到极限值，请加大负载重跑（例如 --set {override}），或运行 `embedperf search`。",
    ),
    "at_least": ("at least", "至少"),
    "measured_p99": (
        "measured P99 at that step: {p99} ms; goodput, successful requests only",
        "该阶梯实测 P99：{p99} ms；按有效吞吐（仅成功请求）计",
    ),
    "capacity_none": (
        "No step meets P99 ≤ {p99} ms within the error budget (peak goodput {qps} req/s at P99 {peak_p99} ms).",
        "没有阶梯在错误预算内满足 P99 ≤ {p99} ms（峰值有效吞吐 {qps} req/s，P99 {peak_p99} ms）。",
    ),
    "capacity_no_slo": (
        "Peak goodput {qps} req/s at P99 {peak_p99} ms on {n} device(s) (no SLO given: pass --slo-p99-ms).",
        "{n} 个设备上峰值有效吞吐 {qps} req/s，P99 {peak_p99} ms（未设定 SLO：可用 --slo-p99-ms 指定）。",
    ),
    "serving_devices": ("Serving devices", "服务设备"),
    "devices_count": ("{n} device(s) counted for capacity", "容量按 {n} 个设备计算"),
    "serving_rule_explicit": ("named with --devices", "由 --devices 指定"),
    "serving_rule_service_info": ("from the target's /info", "来自目标服务 /info"),
    "serving_rule_busy": ("the devices busy under load", "负载下繁忙的设备"),
    "serving_rule_none": ("not determined", "未确定"),
    "generator_bottleneck": ("Load generator a bottleneck?", "压测机是否成为瓶颈？"),
    "generator_bound_yes": (
        "yes (generator CPU max {max}%): figures may understate the target",
        "是（压测机 CPU 最高 {max}%）：数据可能低估目标服务的能力",
    ),
    "generator_bound_no": ("no (generator CPU max {max}%)", "否（压测机 CPU 最高 {max}%）"),
    "requests_ok": ("{ok} successful of {n} requests", "共 {n} 个请求，成功 {ok} 个"),
    "run_details": ("Run details", "运行详情"),
    "saturated": ("saturated", "饱和"),
    "goodput": ("Goodput (req/s)", "有效吞吐 (req/s)"),
    "offered": ("Offered (req/s)", "发送速率 (req/s)"),
    "error_rate_pct": ("Error rate (%)", "错误率 (%)"),
    "errors_by_kind": ("Errors by kind", "错误类型"),
    "ek_connection_refused": ("connection refused", "连接被拒绝"),
    "ek_connection_reset": ("connection reset", "连接被重置"),
    "ek_connection_error": ("connection error", "连接错误"),
    "ek_timeout": ("timeout", "超时"),
    "ek_dropped": ("never sent", "未发送"),
    "ek_cut_off": ("cut off when the run stopped", "运行停止时被中断"),
    "ek_invalid_answer": ("invalid answer", "无效应答"),
    "ek_unknown": ("unknown", "未知"),
    "ek_http": ("HTTP {code}", "HTTP {code}"),
    "bottleneck": ("Bottleneck", "瓶颈"),
    "warn_no_samples": ("no requests in this step", "该阶梯没有请求"),
    "warn_few_samples_p99": ("fewer than 100 ok samples: P99 is unstable", "成功样本少于 100：P99 不稳定"),
    "warn_few_samples_p999": (
        "fewer than 1000 ok samples: P99.9 is unstable",
        "成功样本少于 1000：P99.9 不稳定",
    ),
    "legend": ("Legend", "图例"),
    "goodput_note": (
        "Goodput counts successful requests only; offered counts every request sent, failed ones included.",
        "有效吞吐只计成功请求；发送速率计入所有已发送请求（含失败）。",
    ),
    "error_rate_note": (
        "Error rates are percentages of counted requests; red above the error budget ({budget}).",
        "错误率为占计入请求的百分比；超过错误预算（{budget}）时标红。",
    ),
    "legend_slo": ("meets / misses the SLO", "满足 / 未满足 SLO"),
    "outages": ("Outage windows (target unreachable)", "中断时间窗（目标不可达）"),
    "from_utc": ("From (UTC)", "开始 (UTC)"),
    "to_utc": ("To (UTC)", "结束 (UTC)"),
    "duration_s": ("Duration (s)", "时长 (s)"),
    "connection_errors": ("Connection errors", "连接错误数"),
    "outage_note": (
        "Seconds in which requests failed to connect (refused or reset) and none succeeded.",
        "请求连接失败（拒绝或重置）且没有成功请求的秒数。",
    ),
    "bottlenecks": ("Bottleneck per step (derived from the measurements)", "各阶梯瓶颈（由测量数据推导）"),
    "evidence": ("Evidence", "依据"),
    "bn_generator": ("load generator CPU", "压测机 CPU"),
    "bn_host_launch": (
        "host-bound: the inference worker is busy while the device idles",
        "主机瓶颈：推理线程繁忙而设备空闲",
    ),
    "bn_device": ("device busy (compute-bound)", "设备繁忙（计算瓶颈）"),
    "bn_queue_idle": ("queueing while the device idles", "设备空闲但请求排队"),
    "bn_tokenise": ("tokenisation", "分词"),
    "bn_service_cpu": ("service CPU", "服务 CPU"),
    "bn_client_network": ("client and network", "客户端与网络"),
    "bn_none": ("none reached (not saturated)", "未达到瓶颈（未饱和）"),
    "bn_no_data": ("no data (no successful request)", "无数据（没有成功请求）"),
    "ev_generator_cpu_pct": ("generator CPU", "压测机 CPU"),
    "ev_device_busy_pct": ("device busy", "设备繁忙"),
    "ev_worker_busy_pct": ("inference worker busy", "推理线程繁忙"),
    "ev_service_cpu_pct": ("service CPU", "服务 CPU"),
    "ev_host_cpu_pct": ("host CPU", "主机 CPU"),
    "ev_queue_share_pct": ("queue share of latency", "排队占延迟"),
    "ev_tokenise_share_pct": ("tokenisation share of latency", "分词占延迟"),
    "ev_compute_share_pct": ("compute share of latency", "计算占延迟"),
    "ev_client_network_share_pct": ("client/network share of latency", "客户端/网络占延迟"),
    "bottleneck_rules": (
        "Rules, first match wins: generator CPU ≥ 90%; device (or inference worker) busy ≥ 90%; queue ≥ 30% of "
        "latency while the device is busy < 50%; tokenisation ≥ 30% of latency; service CPU ≥ 90% of the host's "
        "cores (or host CPU ≥ 90%); client and network ≥ 50% of latency; otherwise none reached.",
        "规则（先匹配者优先）：压测机 CPU ≥ 90%；设备（或推理线程）繁忙 ≥ 90%；设备繁忙 < 50% 而排队 ≥ 延迟的 30%；"
        "分词 ≥ 延迟的 30%；服务 CPU ≥ 主机核数的 90%（或主机 CPU ≥ 90%）；客户端与网络 ≥ 延迟的 50%；否则未达瓶颈。",
    ),
    "tokens_per_s": ("Input tokens/s", "输入 token/s"),
    "documents_per_s": ("Documents/s", "文档/s"),
    "quality_cosine": ("Quality probe cosine", "质量探针余弦"),
    "power_total": ("Power, serving devices total (W)", "服务设备总功耗 (W)"),
    "telemetry_note": (
        "Device figures cover the serving devices only; other devices appear in the per-device table.",
        "设备指标仅统计服务设备；其他设备见各设备表。",
    ),
    "per_device": ("Per device", "各设备"),
    "serving": ("Serving", "服务中"),
    "util_idle": ("Util. idle (%)", "空闲利用率 (%)"),
    "util_load": ("Util. under load mean / max (%)", "负载下利用率 均值/最大 (%)"),
    "mem_used_mb": ("Memory max (MB)", "内存最大 (MB)"),
    "per_device_note": (
        "Devices not serving the target are shown in grey; they do not count toward capacity.",
        "未服务目标的设备以灰色显示，不计入容量。",
    ),
    "sources": ("Telemetry sources", "遥测源"),
    "source": ("Source", "来源"),
    "status": ("Status", "状态"),
    "samples": ("Samples", "样本数"),
    "reason": ("Reason", "原因"),
    "src_ok": ("ok", "正常"),
    "src_skipped": ("skipped", "已跳过"),
    "src_partial": ("partial", "部分"),
    "src_failed": ("failed", "失败"),
    "src_skipped_note": (
        "not available on this host (expected, e.g. no accelerator), not an error",
        "本主机不可用（预期情况，例如没有加速卡），并非错误",
    ),
    "no_sources": ("No telemetry source ran.", "没有运行任何遥测源。"),
    "clock_offset": ("clock offset {offset} s", "时钟偏移 {offset} s"),
    "missing_seconds": ("{n} s missing", "缺失 {n} 秒"),
    "energy": ("Energy (serving devices)", "能耗（服务设备）"),
    "embeddings_per_s": ("Embeddings/s", "向量/s"),
    "j_per_1k": ("J per 1,000 embeddings", "每 1000 个向量耗能 (J)"),
    "j_per_1m_tokens": ("J per million input tokens", "每百万输入 token 耗能 (J)"),
    "energy_note": (
        "Mean total power of the serving devices divided by the step's successful embeddings (or input tokens) "
        "per second.",
        "服务设备平均总功耗除以该阶梯每秒成功生成的向量数（或输入 token 数）。",
    ),
    "no_figures": ("No figures: the run recorded no request.", "无图表：本次运行没有记录请求。"),
    "plan_per_1k": (
        "{devices} device(s) per 1,000 req/s with {headroom} headroom ({usable} usable req/s per replica); "
        "set slo.target_qps in the scenario for a plan at your target.",
        "每 1000 req/s 需 {devices} 个设备（预留 {headroom} 余量，每副本可用 {usable} req/s）；"
        "在场景中设置 slo.target_qps 可得到目标负载下的规划。",
    ),
    "plan_per_1k_at_most": (
        "at most {devices} device(s) per 1,000 req/s with {headroom} headroom ({usable} usable req/s per "
        "replica; at most, because the capacity is a lower bound); set slo.target_qps in the scenario for a "
        "plan at your target.",
        "每 1000 req/s 最多需 {devices} 个设备（预留 {headroom} 余量，每副本可用 {usable} req/s；容量只是下限，"
        "故为“最多”）；在场景中设置 slo.target_qps 可得到目标负载下的规划。",
    ),
    "plan_unavailable": (
        "no step meets the SLO, so no device count can be derived",
        "没有阶梯满足 SLO，无法推算设备数",
    ),
    "mismatch_tol": ("Mismatch (tolerance {tol})", "偏差（容差 {tol}）"),
    "little_within": ("within {tol}", "在 {tol} 以内"),
    "little_off": ("off by more than {tol}: generator or think time?", "偏差超过 {tol}：压测机或思考时间？"),
    "little_off_errors": (
        "off by more than {tol}: errors ({errors} of answers failed; refusals return at once)",
        "偏差超过 {tol}：错误所致（{errors} 的应答失败；拒绝会立即返回）",
    ),
    "little_off_generator": (
        "off by more than {tol}: generator bottleneck (its CPU at {cpu})",
        "偏差超过 {tol}：压测机瓶颈（其 CPU {cpu}）",
    ),
    "little_off_unexplained": (
        "off by more than {tol}: not errors, nor the generator (CPU {cpu}): think time?",
        "偏差超过 {tol}：既非错误也非压测机（CPU {cpu}）：思考时间？",
    ),
    # comparison: column names, gate status, warnings
    "m_qps": ("Goodput (req/s)", "有效吞吐 (req/s)"),
    "m_tokens_per_s": ("Input tokens/s", "输入 token/s"),
    "m_unavailable_s": ("Unavailable (s)", "不可用 (秒)"),
    "m_p50_ms": ("P50 (ms)", "P50 (ms)"),
    "m_p95_ms": ("P95 (ms)", "P95 (ms)"),
    "m_p99_ms": ("P99 (ms)", "P99 (ms)"),
    "m_error_rate": ("Error rate (%)", "错误率 (%)"),
    "m_device_util_pct": ("Device util. (%)", "设备利用率 (%)"),
    "m_service_cpu_pct": ("Service CPU (%)", "服务 CPU (%)"),
    "m_mem_used_mb": ("Device memory (MB)", "设备内存 (MB)"),
    "gate_no_verdict": ("NO VERDICT", "无结论"),
    "no_verdict_mark": (
        "no verdict: the data cannot support this change (hover for why)",
        "无结论：数据不足以支持该变化（悬停查看原因）",
    ),
    "incomplete": ("incomplete", "不完整"),
    "reason_col": ("Reason (numbers)", "原因（数值）"),
    "compare_warnings": ("Warnings: changes without a verdict", "警告：无法给出结论的变化"),
    "unmatched_steps": ("Steps without a match at the same load", "未能按相同负载匹配的阶梯"),
    "no_verdict_because": (
        "No verdict: this comparison cannot judge the candidate, because",
        "无结论：本次对比无法评判候选运行，原因如下",
    ),
    "no_verdict_note": (
        "No verdict is given where the data cannot support one: fewer ok samples than the percentile needs "
        "(P99: 100, P95: 20), fewer than 10 s of steady state for a goodput interval, a zero-width interval, "
        "loads that do not match, or a step without ok requests. Hold steps longer and compare runs of the same loads.",
        "数据不足时不给结论：成功样本少于分位数所需（P99：100，P95：20）、稳态不足 10 秒无法估计吞吐区间、"
        "区间宽度为零、负载不匹配，或阶梯没有成功请求。请延长阶梯时长，并对比相同负载的运行。",
    ),
    "error_budget_rule": (
        "The error budget ({budget}) is always a gate rule: a candidate step over it fails, whatever its speed.",
        "错误预算（{budget}）始终是门禁规则：候选运行任一阶梯超出预算即失败，无论其速度如何。",
    ),
    # capacity search (reports/templates/_search.html.j2, reports/search_section.py)
    "search_title": ("Capacity search", "容量搜索"),
    "search_answer": (
        "{per_device} req/s per device at P99 <= {p99} ms ({rps} req/s on {n} device(s){span})",
        "每设备 {per_device} req/s，P99 <= {p99} ms（{n} 个设备共 {rps} req/s{span}）",
    ),
    "search_span": (", between {low} and {high} req/s", "，介于 {low} 与 {high} req/s 之间"),
    "search_no_answer": (
        "No probed rate meets P99 <= {p99} ms ({status}: {note})",
        "没有探测速率满足 P99 <= {p99} ms（{status}：{note}）",
    ),
    "search_no_answer_errors": (
        "No probed rate is served within the error budget ({status}: {note})",
        "没有探测速率能在错误预算内得到服务（{status}：{note}）",
    ),
    "search_measured": (
        "measured P99 at the answer: {p99} ms; {probes} probe(s)",
        "答案处实测 P99：{p99} ms；共 {probes} 次探测",
    ),
    "search_measured_interval": (
        "measured P99 at the answer: {p99} ms ({confidence} interval {lower}-{upper} ms); {probes} probe(s)",
        "答案处实测 P99：{p99} ms（{confidence} 置信区间 {lower}-{upper} ms）；共 {probes} 次探测",
    ),
    "search_verdict_met": (
        "met with confidence up to {rps} req/s (search: {status})",
        "在 {rps} req/s 及以下以置信度满足（搜索：{status}）",
    ),
    "search_verdict_none": (
        "not met at any probed rate (search: {status})",
        "所有探测速率均不满足（搜索：{status}）",
    ),
    "fs_interval": ("P99 and its {confidence} interval", "P99 及其 {confidence} 置信区间"),
    "search_arrivals": ("arrivals: {arrival}", "到达过程：{arrival}"),
    "search_rule": (
        "Open-loop probes; latency is measured from each request's intended send time. A probe passes when the "
        "upper end of its {confidence} P99 interval (order statistics, binomial) is <= {p99} ms, its error rate "
        "<= {budget}% and its goodput >= {goodput} of the offered rate (answers completed within the probe's "
        "window); it fails when the lower end is above the SLO or errors/goodput fail it; otherwise it is "
        "repeated once and judged on both samples pooled. A rate still uncertain then is at the SLO within the "
        "interval and bounds the bracket from above like a failing one. Bracket by x{growth}, bisect until "
        "(top - low) / top <= {precision}, confirm the answer with a {confirm}x longer probe (never longer than "
        "max_probe_s).",
        "开环探测；延迟从每个请求的计划发送时刻计时。当某次探测的 P99 {confidence} 置信区间（顺序统计量，二项分布）"
        "上端 <= {p99} ms、错误率 <= {budget}% 且有效吞吐 >= 发送速率的 {goodput}（在探测时间窗内完成的应答）时判为通过；"
        "区间下端高于 SLO 或错误率/有效吞吐不达标时判为失败；否则重复一次，并合并两次样本判定。合并后仍不确定的速率"
        "即在区间分辨率内处于 SLO，与失败速率一样作为区间上界。按 x{growth} 定界，二分直到 (上界 - 下界) / 上界 <= "
        "{precision}，最后以 {confirm} 倍时长（不超过 max_probe_s）的探测确认答案。",
    ),
    "search_at_answer": ("At the answer", "答案处"),
    "search_phase": ("Phase", "阶段"),
    "n_ok": ("Ok", "成功"),
    "p99_interval_ms": ("P99 interval (ms)", "P99 区间 (ms)"),
    "bracket_after": ("Bracket after (req/s)", "探测后的区间 (req/s)"),
    "host_cpu_pct": ("Host CPU (%)", "主机 CPU (%)"),
    "service_busy_pct": ("Inference worker busy (%)", "推理线程忙碌 (%)"),
    "fig_search": ("Capacity search: every probe", "容量搜索：全部探测"),
    "fs_p99": ("P99 ({verdict})", "P99（{verdict}）"),
    "fs_slo": ("SLO P99", "SLO P99"),
    "fs_answer": ("answer {rps} req/s", "答案 {rps} req/s"),
    "fs_xlabel": (
        "offered rate (req/s); x = P50, numbers = probe order",
        "发送速率 (req/s)；x = P50，数字 = 探测顺序",
    ),
    "fs_ylabel": ("latency from intended start (ms)", "自计划发送时刻起的延迟 (ms)"),
    "ph_bracket": ("bracket", "定界"),
    "ph_bisect": ("bisect", "二分"),
    "ph_repeat": ("repeat", "重复"),
    "ph_confirm": ("confirm", "确认"),
    "sv_pass": VERDICT_TEXT["pass"],
    "sv_fail": VERDICT_TEXT["fail"],
    "sv_uncertain": VERDICT_TEXT["uncertain"],
    "sv_no_verdict": VERDICT_TEXT["no_verdict"],
    "sst_found": ("found", "已找到"),
    "sst_at_slo": ("at the SLO within its interval", "在置信区间内处于 SLO"),
    "sst_wide_interval": ("interval too wide for --precision", "置信区间过宽，达不到 --precision"),
    "sst_uncertain": ("uncertain", "不确定"),
    "sst_unconfirmed": ("unconfirmed", "未确认"),
    "sst_above_max_rate": ("above the maximum rate", "超出最高速率"),
    "sst_below_min_rate": ("below the minimum rate", "低于最低速率"),
    "sst_max_duration": ("time limit reached", "达到时间上限"),
    "sst_mixed": ("differs between repeats", "各次重复结果不同"),
    "sst_none": ("no search record", "没有搜索记录"),
    # decisions.search.state.NOTES, by status (found has none)
    "sn_uncertain": (
        "the P99 at {rate:g} req/s stays within its interval of the SLO",
        "{rate:g} req/s 处的 P99 置信区间始终跨越 SLO",
    ),
    "sn_unconfirmed": ("the confirming probe at {rate:g} req/s failed", "{rate:g} req/s 处的确认探测失败"),
    "sn_above_max_rate": (
        "every probe up to max_rate {rate:g} req/s passed",
        "直到 max_rate {rate:g} req/s 的所有探测均通过",
    ),
    "sn_below_min_rate": (
        "even {rate:g} req/s, the lowest rate this search probes, does not meet the SLO with confidence "
        "(below {floor:.3g} req/s a probe of {probe_s:g} s collects fewer than {samples:g} ok answers)",
        "即使本次搜索探测的最低速率 {rate:g} req/s 也不能以置信度满足 SLO"
        "（低于 {floor:.3g} req/s 时，{probe_s:g} s 的探测收集不到 {samples:g} 个成功应答）",
    ),
    "sn_below_min_rate_errors": (
        "even {rate:g} req/s, the lowest rate this search probes, fails on errors: {error_rate_pct:.1f}% of "
        "its requests failed (error budget {budget_pct:g}%); the target refuses or fails this load",
        "即使本次搜索探测的最低速率 {rate:g} req/s 也因错误而失败：{error_rate_pct:.1f}% 的请求失败"
        "（错误预算 {budget_pct:g}%）；目标拒绝或无法处理该负载",
    ),
    "sn_at_slo": (
        "at {rate:g} req/s the P99 is at the SLO within its {confidence_pct:g}% interval "
        "({lower_ms:.1f}-{upper_ms:.1f} ms); the SLO is met with confidence up to {answer:g} req/s",
        "在 {rate:g} req/s 处，P99 在其 {confidence_pct:g}% 置信区间（{lower_ms:.1f}-{upper_ms:.1f} ms）内处于 SLO；"
        "以置信度满足 SLO 的速率最高为 {answer:g} req/s",
    ),
    "sn_wide_interval": (
        "at {rate:g} req/s, {gap_pct:.0f}% above the answer {answer:g} req/s (more than --precision "
        "{precision_pct:g}%), the P99's {confidence_pct:g}% interval ({lower_ms:.1f}-{upper_ms:.1f} ms) still "
        "contains the SLO: with {samples:g} ok answers the interval is too wide to narrow the answer; raise "
        "--min-ok-requests (and --max-probe-s so probes can collect them)",
        "在 {rate:g} req/s（比答案 {answer:g} req/s 高 {gap_pct:.0f}%，超过 --precision {precision_pct:g}%）处，"
        "P99 的 {confidence_pct:g}% 置信区间（{lower_ms:.1f}-{upper_ms:.1f} ms）仍包含 SLO：{samples:g} 个成功应答"
        "的区间太宽，无法收窄答案；请增大 --min-ok-requests（并相应增大 --max-probe-s 以便探测能收集到）",
    ),
    "sn_max_duration": ("stopped at --max-duration {seconds:g} s", "在 --max-duration {seconds:g} s 处停止"),
    # decisions.search.state.REASONS, by code
    "sr_error_budget": (
        "error rate {error_rate_pct:.2f}% above the budget {budget_pct:g}%",
        "错误率 {error_rate_pct:.2f}% 超出预算 {budget_pct:g}%",
    ),
    "sr_goodput_short": (
        "goodput {goodput_rps:.1f} req/s short of the offered {offered_rps:.1f} req/s",
        "有效吞吐 {goodput_rps:.1f} req/s 低于发送速率 {offered_rps:.1f} req/s",
    ),
    "sr_no_ok": ("no ok request after the warm-up", "预热后没有成功请求"),
    "sr_p99_within": (
        "P99 {p99_ms:.1f} ms, interval up to {upper_ms:.1f} ms within {slo_ms:g} ms",
        "P99 {p99_ms:.1f} ms，区间上端 {upper_ms:.1f} ms 在 {slo_ms:g} ms 以内",
    ),
    "sr_p99_above": (
        "P99 {p99_ms:.1f} ms, interval from {lower_ms:.1f} ms above {slo_ms:g} ms",
        "P99 {p99_ms:.1f} ms，区间下端 {lower_ms:.1f} ms 高于 {slo_ms:g} ms",
    ),
    "sr_p99_straddles": (
        "P99 {p99_ms:.1f} ms, interval {lower_ms:.1f} ms .. {upper_text} straddles the SLO",
        "P99 {p99_ms:.1f} ms，区间 {lower_ms:.1f} ms .. {upper_text} 跨越 SLO",
    ),
    # latency by input length (_lengths.html.j2)
    "lengths_title": ("Latency by input length (tokens per request)", "按输入长度的延迟（每请求 token 数）"),
    "input_tokens": ("Input tokens", "输入 token 数"),
    # slowest requests (_slowest.html.j2) and the fallback model's share per step
    "slowest_title": ("Slowest requests (steady state, ok)", "最慢的请求（稳态，成功）"),
    "slowest_note": (
        "Each request was sent with its X-Request-ID: search the service's log for the ID to see what the "
        "service did with it. Server total is the service's own time (Server-Timing).",
        "每个请求都带有其 X-Request-ID：在服务日志中搜索该 ID，可查看服务如何处理该请求。服务端合计为服务自测的耗时"
        "（Server-Timing）。",
    ),
    "request_id": ("Request ID", "请求 ID"),
    "served_model": ("Served by", "应答模型"),
    "sent_utc": ("Sent (UTC)", "发送时间 (UTC)"),
    "n_inputs": ("Inputs", "输入条数"),
    "fallback_share": ("Fallback share", "降级模型占比"),
    "fallback_flag": (
        "part of this step was answered by the fallback model {model}",
        "该阶梯的部分请求由降级模型 {model} 应答",
    ),
    "fallback_note": (
        "⚑ = steps partly answered by the fallback model {model} (the share of ok requests whose answer named "
        "it in X-Served-Model): their figures measure a mix of two models.",
        "⚑ = 部分请求由降级模型 {model} 应答的阶梯（占比为应答头 X-Served-Model 标明该模型的成功请求所占比例）："
        "其指标反映的是两个模型的混合。",
    ),
    # quality probes (_quality_probes.html.j2)
    "qp_title": (
        "Quality probes (cosine to fp32 reference, gate {gate})",
        "质量探针（与 fp32 基准的余弦，门限 {gate}）",
    ),
    "qp_below_banner": (
        "Embedding quality below the gate in: {steps}",
        "以下阶梯的向量质量低于门限：{steps}",
    ),
    "qp_probes": ("Probes", "探针数"),
    "qp_cosine_mean": ("Mean cosine", "平均余弦"),
    "qp_cosine_min": ("Min cosine", "最小余弦"),
    "qp_below": ("below", "低于门限"),
    # run details and the precision block
    "max_paren": ("(max {value})", "（最大 {value}）"),
    "agent_host": ("agent {host}", "代理 {host}"),
    "service_versions": ("service: {versions}", "服务：{versions}"),
    "precision_pair": (
        "{candidate} vs {reference} ({n} texts)",
        "{candidate} 对比 {reference}（{n} 条文本）",
    ),
    "cosine": ("Cosine", "余弦"),
    "cosine_stats": ("mean {mean} · min {min} · P1 {p1}", "均值 {mean} · 最小 {min} · P1 {p1}"),
    "precision_gate_text": ("mean cosine ≥ {gate} ({profile})", "平均余弦 ≥ {gate}（{profile}）"),
    # the precision report (embedperf precision --report)
    "pr_title": ("Precision check", "精度检查"),
    # embedperf verify: the four-layer release verdict (reports/templates/verify.html.j2)
    "vf_title": ("Release verification", "上线验证"),
    "vf_verdict": ("Verdict", "结论"),
    "vf_verdict_pass": ("Every layer passes: ready to release", "四层检查全部通过：可以上线"),
    "vf_verdict_fail": ("A layer fails: do not release", "有一层未通过：不可上线"),
    "vf_verdict_incomplete": ("Incomplete: not every layer was judged", "不完整：并非每一层都已判定"),
    "vf_exit_code": ("Exit code", "退出码"),
    "vf_rule": (
        "The layers run in order and the first that fails stops the rest. A warning passes (it names what "
        "to look at); only a failure blocks the release.",
        "各层按顺序执行，第一个失败的层会终止其后各层。警告不阻止上线（只指出需要关注之处）；只有失败才阻止上线。",
    ),
    "vf_layers": ("Layers", "各层"),
    "vf_layer": ("Layer", "层"),
    "vf_what": ("What it checks", "检查内容"),
    "vf_outcome": ("Outcome", "结果"),
    "vf_line": ("Summary", "摘要"),
    "vf_layer_heading": ("Layer {n}: {title}", "第 {n} 层：{title}"),
    "vf_layer_1": ("Function and precision", "功能与精度"),
    "vf_layer_2": ("Performance and utilisation", "性能与利用率"),
    "vf_layer_3": ("Stability", "稳定性"),
    "vf_layer_4": ("Operational readiness", "运维就绪"),
    "vf_check": ("Check", "检查项"),
    "vf_note": ("Note", "说明"),
    "vf_evidence": ("Evidence", "证据"),
    "vf_thresholds": ("Thresholds and lengths (the verify section)", "阈值与时长（verify 配置段）"),
    "vf_status_pass": ("pass", "通过"),
    "vf_status_warn": ("warn", "警告"),
    "vf_status_fail": ("fail", "失败"),
    "vf_status_incomplete": ("incomplete", "不完整"),
    "vf_status_not_run": ("not run", "未执行"),
    "vf_status_skipped": ("skipped", "已跳过"),
    "pr_verdict": ("Verdict", "结论"),
    "pr_passes": ("Passes every precision gate", "通过全部精度门限"),
    "pr_fails": ("Fails the precision gate", "未通过精度门限"),
    "pr_dataset": ("Evaluation set", "评测集"),
    "pr_cosine_stats": (
        "mean {mean} · P5 {p5} · P1 {p1} · min {min}",
        "均值 {mean} · P5 {p5} · P1 {p1} · 最小 {min}",
    ),
    "pr_gates": ("Gates", "门限"),
    "pr_gate": ("Gate", "门限"),
    "pr_threshold": ("Threshold", "阈值"),
    "pr_measured": ("Measured", "实测"),
    "pr_gate_mean": ("Mean cosine to fp32", "与 fp32 的平均余弦"),
    "pr_gate_domain": ("Every domain: mean and P5 cosine", "每个领域：平均与 P5 余弦"),
    "pr_gate_topk": ("agreement@{k}", "agreement@{k}（前 {k} 近邻重合率）"),
    "pr_domains_failing": ("{n} of {total} below", "{total} 个中 {n} 个低于阈值"),
    "pr_profile_note": (
        "Profile {profile}; each threshold can be set with --min-domain-cosine and --min-topk-agreement.",
        "档位 {profile}；阈值可用 --min-domain-cosine 与 --min-topk-agreement 调整。",
    ),
    "pr_domains": ("Agreement per domain", "分领域一致性"),
    "pr_domains_note": (
        "Each language, input-length band (tokens) and label value is gated on its own: its mean and its P5 "
        "cosine must both reach {gate}, so a domain the configuration damages fails even when the overall mean "
        "passes.",
        "每种语言、输入长度区间（token 数）和标签值单独把关：其平均余弦与 P5 余弦都须达到 {gate}，"
        "因此即使总体均值通过，被该配置损坏的领域也会判为不通过。",
    ),
    "pr_axis": ("Breakdown", "维度"),
    "pr_group": ("Group", "分组"),
    "pr_n": ("Texts", "文本数"),
    "pr_min": ("Min", "最小"),
    "pr_worst": ("Worst inputs (cosine)", "最差输入（余弦）"),
    "pr_worst_overall": ("The {n} inputs furthest from fp32", "离 fp32 最远的 {n} 条输入"),
    "pr_id": ("Id", "编号"),
    "pr_text": ("Text", "文本"),
    "pr_retrieval": ("Retrieval agreement", "检索一致性"),
    "pr_retrieval_note_queries": (
        "Each of the {q} queries against the {d} documents: the overlap of its top-{k} neighbours under fp32 and "
        "under the candidate, and Spearman's rank correlation of its whole ranking.",
        "{q} 条查询分别检索 {d} 篇文档：fp32 与候选配置下前 {k} 个近邻的重合率，以及完整排序的 Spearman 秩相关。",
    ),
    "pr_retrieval_note_all": (
        "Each of the {q} texts against the other {d}: the overlap of its top-{k} neighbours under fp32 and under "
        "the candidate, and Spearman's rank correlation of its whole ranking.",
        "{q} 条文本分别检索其余 {d} 条：fp32 与候选配置下前 {k} 个近邻的重合率，以及完整排序的 Spearman 秩相关。",
    ),
    "pr_mean_min": ("mean {mean} · min {min}", "均值 {mean} · 最小 {min}"),
    "pr_rank_correlation": ("Rank correlation (Spearman)", "秩相关（Spearman）"),
    "pr_layers": ("Agreement layer by layer", "逐层一致性"),
    "pr_layers_note": (
        "Hidden states of fp32 and the candidate on the same {n} inputs, compared token by token with padding "
        "masked: cosine mean, P5 and min; relative error ‖cand − fp32‖ / ‖fp32‖ mean / P95 / max; drop is the "
        "mean cosine lost against the layer's input. Hidden states agree less than pooled embeddings (pooling "
        "averages errors out): the gate line ({gate}) locates where the deviation starts, the verdict stays "
        "with the embedding gate.",
        "fp32 与候选配置在同样 {n} 条输入上的隐藏状态，逐 token 比较（屏蔽填充）：余弦的均值、P5 与最小值；"
        "相对误差 ‖cand − fp32‖ / ‖fp32‖ 的均值 / P95 / 最大值；下降为相对该层输入损失的平均余弦。"
        "隐藏状态的一致性低于池化后的向量（池化会平均掉误差）：门限线（{gate}）用于定位偏差从哪里开始，"
        "结论仍以向量门限为准。",
    ),
    "pr_first_below": ("First layer below {gate}: {name}", "第一个低于 {gate} 的层：{name}"),
    "pr_none_below": ("No layer's mean cosine is below {gate}", "没有层的平均余弦低于 {gate}"),
    "pr_largest_drop": ("largest drop: {name}", "下降最大的层：{name}"),
    "pr_largest_drop_linear": ("largest drop of a Linear: {name}", "下降最大的线性层：{name}"),
    "pr_layer": ("Layer", "层"),
    "pr_n_tokens": ("Tokens", "token 数"),
    "pr_rel_error": ("Relative error (mean / P95 / max)", "相对误差（均值 / P95 / 最大）"),
    "pr_drop": ("Drop", "下降"),
    "fig_pr_layers": ("Agreement against depth", "一致性随深度的变化"),
    "fig_pr_linears": ("Each Linear's output (mean cosine)", "各线性层输出（平均余弦）"),
    "pr_fig_depth": ("encoder layer", "编码层"),
    "pr_fig_cosine": ("token cosine to fp32", "与 fp32 的 token 余弦"),
    "pr_fig_mean": ("mean", "均值"),
    "pr_fig_gate": ("gate {gate}", "门限 {gate}"),
    "pr_advice": ("Which Linear layers int8 keeps in fp32", "int8 应保留哪些线性层为 fp32"),
    "pr_kept": ("Kept in fp32", "保留 fp32"),
    "pr_kept_text": (
        "{kept} of {n} Linear layers (attention-only, {attn_expr}, keeps {attn})",
        "{n} 个线性层中保留 {kept} 个（仅注意力量化 {attn_expr} 保留 {attn} 个）",
    ),
    "pr_advised": ("Advised variant (loaded as the service loads it)", "建议的变体（按服务的加载方式加载）"),
    "pr_one_fewer": ("With one layer fewer in fp32", "少保留一层时"),
    "pr_check": (
        "cosine {cosine} · agreement@{k} {agreement} · {kept} kept in fp32",
        "余弦 {cosine} · agreement@{k} {agreement} · 保留 {kept} 个 fp32 层",
    ),
    "pr_advice_none": (
        "No int8 variant passes the gate on this model: keep it in fp32 or use bf16.",
        "该模型没有能通过门限的 int8 变体：请保持 fp32 或使用 bf16。",
    ),
    "pr_sensitivity": (
        "Sensitivity: each Linear alone in int8 ({probe} of {n} texts)",
        "敏感度：每次只量化一个线性层（{n} 条文本中的 {probe} 条）",
    ),
    "pr_cosine_drop": ("Cosine lost", "余弦损失"),
    "pr_speed": ("Speed, measured side by side in one run", "同一次运行中并排实测的速度"),
    "pr_variant": ("Variant", "变体"),
    "pr_texts_per_s": ("Texts/s", "文本/秒"),
    "pr_ratio": ("vs fp32", "相对 fp32"),
    # matrix by searched capacity
    "searched_capacity": ("Searched capacity (req/s per device)", "搜索所得容量（每设备 req/s）"),
    "searched_bracket": ("between {low} and {high}", "介于 {low} 与 {high}"),
    "matrix_measure_search": (
        "Each configuration was measured by a capacity search (embedperf search) on a fresh service; they are "
        "ranked by the highest rate meeting P99 <= {p99} ms, with the search's bracket as its uncertainty.",
        "每个配置都在新启动的服务上做了容量搜索（embedperf search），按满足 P99 <= {p99} ms 的最高速率排序，"
        "搜索的最终区间即其不确定度。",
    ),
    "recommend_search_text": (
        "{name}: the highest searched capacity ({rps} req/s per device at P99 <= {p99} ms) among configurations "
        "that pass the precision gate.",
        "{name}：在通过精度门禁的配置中，搜索所得容量最高（每设备 {rps} req/s，P99 <= {p99} ms）。",
    ),
    "rank": ("Rank", "排名"),
    **CANARY_CATALOGUE,
    **PLAN_CATALOGUE,
    **COMPARE_CATALOGUE,
}

# Collector and agent reasons are written by the sources in English; these known phrases are
# translated, the technical rest (paths, URLs, exception text) is kept as is.
REASON_PHRASES: dict[str, str] = {
    "not found on PATH": "未在 PATH 中找到",
    "pass --npu-smi PATH (or set EMBEDPERF_NPU_SMI)": "请传入 --npu-smi PATH（或设置 EMBEDPERF_NPU_SMI）",
    "or drop the npu_smi source": "或去掉 npu_smi 数据源",
    "NVML reports no GPUs": "NVML 未报告任何 GPU",
    "without writing collectors.json": "且未写出 collectors.json",
    "log tail": "日志末尾",
    "never answered": "从未应答",
    "without samples": "没有样本",
    "could not start collectors": "无法启动采集进程",
    "nvidia-ml-py is not installed": "未安装 nvidia-ml-py",
    "no NVIDIA driver": "没有 NVIDIA 驱动",
    "no --prometheus-url given": "未提供 --prometheus-url",
    "disabled with --no-collectors": "已用 --no-collectors 禁用",
    "collectors package not installed": "未安装 collectors 包",
    "no samples were collected": "未采集到样本",
    "incomplete": "不完整",
    "see events": "见事件",
    "lists no NPUs": "未列出任何 NPU",
    "not started": "未启动",
    "exited with": "退出码",
    "check --prometheus-url": "请检查 --prometheus-url",
}


def reason_text(reason: str, lang: str) -> str:
    """A source's reason in lang: known phrases translated, paths and error text kept."""
    if lang != "zh":
        return reason
    for phrase, zh in REASON_PHRASES.items():
        reason = reason.replace(phrase, zh)
    return reason


def error_kind_text(kind: str, lang: str) -> str:
    """connection_refused -> "connection refused"; http_503 -> "HTTP 503"."""
    if kind.startswith("http_"):
        return t("ek_http", lang, code=kind[5:])
    return t(f"ek_{kind}", lang) if f"ek_{kind}" in CATALOGUE else kind


def t(key: str, lang: str = "en", **params: Any) -> str:
    """The string for key in lang (English if lang is unknown), formatted with params."""
    pair = CATALOGUE.get(key)
    if pair is None:
        return key
    text = pair[1] if lang == "zh" else pair[0]
    if params:
        try:
            return text.format(**{k: ("—" if v is None else v) for k, v in params.items()})
        except (KeyError, IndexError, ValueError):
            return text
    return text
