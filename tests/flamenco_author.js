// A recording stand-in for Flamenco Manager's job-compiler globals, written from Flamenco's documentation (job
// types, the job author API: author.Task(name, type), author.Command(name, parameters), task.addCommand,
// task.addDependency, job.addTask; the globals frameChunker, path and print), so a job type's compileJob runs
// under Node.js and its tasks can be checked.
//
//   node tests/flamenco_author.js SCRIPT.js job-type            -> JOB_TYPE as JSON
//   node tests/flamenco_author.js SCRIPT.js compile JOB.json    -> {"tasks": [...]} or {"error": "..."}
"use strict";
const fs = require("fs");
const vm = require("vm");

function task(name, type) {
    name = String(name).trim();
    type = String(type).trim();
    if (!name) throw new Error("author.Task(name, type): name is required");
    if (!type) throw new Error("author.Task(name, type): type is required");
    const t = { name, type, commands: [], dependencies: [] };
    return {
        _record: t,
        addCommand(cmd) { t.commands.push(cmd); },
        addDependency(other) { t.dependencies.push(other._record.name); },
    };
}

// Flamenco's frameChunker (internal/manager/job_compilers/js_globals.go and its tests): the frames of a list such as
// "1-10, 20..25, 40" (either range notation, whitespace ignored, each frame once, in order) in chunks of `size`;
// each chunk written with "a-b" for runs of three frames or more and single frames (so two-frame runs as "9,10"),
// joined by ",". An empty list or a size below 1 is an error.
function frameChunker(frames, size) {
    if (!(size >= 1)) throw new Error(`invalid chunk size, must be positive number: ${size}`);
    const seen = new Set();
    for (const part of String(frames).replace(/\.\./g, "-").split(",")) {
        const ends = part.split("-").map((x) => x.trim());
        if (ends.length > 2 || ends.some((x) => !/^-?\d+$/.test(x))) {
            throw new Error(`frameChunker: invalid range "${frames}": "${part}"`);
        }
        for (let f = +ends[0]; f <= +ends[ends.length - 1]; f++) seen.add(f);
    }
    const all = [...seen].sort((a, b) => a - b);
    if (all.length === 0) throw new Error(`frameChunker: invalid range "${frames}": empty range`);
    const chunks = [];
    for (let i = 0; i < all.length; i += size) {
        const runs = [];
        for (const f of all.slice(i, i + size)) {
            const last = runs[runs.length - 1];
            if (last && last[1] === f - 1) last[1] = f; else runs.push([f, f]);
        }
        chunks.push(runs.map(([a, b]) => (b - a >= 2 ? `${a}-${b}` : a === b ? `${a}` : `${a},${b}`)).join(","));
    }
    return chunks;
}

const path = {  // Flamenco's path helpers work on forward-slash paths
    join: (...parts) => parts.filter((p) => p !== "").join("/").replace(/\/+/g, "/"),
    dirname: (p) => (p.includes("/") ? p.slice(0, p.lastIndexOf("/")) || "/" : "."),
    basename: (p) => p.slice(p.lastIndexOf("/") + 1),
};

const [script, mode, jobFile] = process.argv.slice(2);
const context = vm.createContext({
    author: { Task: task, Command: (name, parameters) => ({ name, parameters }) },
    frameChunker, path, print: () => {},
});
vm.runInContext(fs.readFileSync(script, "utf8"), context, { filename: script });
if (mode === "job-type") {
    process.stdout.write(JSON.stringify(vm.runInContext("JOB_TYPE", context)));
} else {
    const input = JSON.parse(fs.readFileSync(jobFile, "utf8"));
    const tasks = [];
    const job = { name: input.name, settings: input.settings, created: new Date(0),
                  addTask: (t) => tasks.push(t._record) };
    try {
        context.compileJob(job);
        process.stdout.write(JSON.stringify({ tasks }));
    } catch (err) {
        process.stdout.write(JSON.stringify({ error: String(err && err.message ? err.message : err) }));
    }
}
