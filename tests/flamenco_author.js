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

// Frame list "1-10, 12" in chunks of `size` frames, each chunk written as comma-separated runs "a-b".
function frameChunker(frames, size) {
    const all = [];
    for (const part of String(frames).split(",")) {
        const m = part.trim().match(/^(\d+)(?:-(\d+))?$/);
        if (!m) throw new Error(`frameChunker: cannot parse "${part}"`);
        for (let f = +m[1]; f <= +(m[2] === undefined ? m[1] : m[2]); f++) all.push(f);
    }
    const chunks = [];
    for (let i = 0; i < all.length; i += Math.max(1, size)) {
        const runs = [];
        for (const f of all.slice(i, i + Math.max(1, size))) {
            const last = runs[runs.length - 1];
            if (last && last[1] === f - 1) last[1] = f; else runs.push([f, f]);
        }
        chunks.push(runs.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(","));
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
