// Resource embedding through the real supabase-js against the real idp, as PostgREST 12 behaves
// (Plan.hs: findRel, addNullEmbedFilters, validateSpreadEmbeds; QueryBuilder.hs: lateral joins;
// Error.hs: PGRST200, PGRST201, PGRST108, PGRST118, PGRST119). The fixture tables are this file's
// own, made after the idp started (so the first request also reloads the schema cache on its miss).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createUser, sharedIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { serviceClient, userClient } from './helpers/supabase.js';

let alice: Awaited<ReturnType<typeof createUser>>;
let bob: Awaited<ReturnType<typeof createUser>>;

const ctx = sharedIdp({}, async () => {
  alice = await createUser(ctx.idp, 'embed-alice@example.com');
  bob = await createUser(ctx.idp, 'embed-bob@example.com');
  await ctx.db.query(`
    create table public.authors (id int primary key, name text not null, country text);
    create table public.books (
      id int primary key, title text not null, published int,
      author_id int references public.authors (id), editor_id int references public.authors (id));
    create table public.genres (id int primary key, name text not null);
    create table public.book_genres (
      book_id int references public.books (id), genre_id int references public.genres (id), primary key (book_id, genre_id));
    create table public.author_profiles (author_id int primary key references public.authors (id), bio text);
    create table public.employees (id int primary key, name text not null, manager_id int references public.employees (id));
    create table public.reviews (
      id int primary key, book_id int not null references public.books (id),
      user_id uuid not null default auth.uid() references auth.users (id), stars int not null);
    alter table public.reviews enable row level security;
    create policy reviews_own on public.reviews for select to authenticated using ((select auth.uid()) = user_id);
    create policy reviews_write on public.reviews for insert to authenticated with check ((select auth.uid()) = user_id);
    grant select on public.authors, public.books, public.genres, public.book_genres, public.author_profiles,
      public.employees to anon, authenticated, service_role;
    grant select, insert on public.reviews to authenticated, service_role;
    grant insert on public.books to service_role;

    insert into public.authors values (1, 'Ann', 'NZ'), (2, 'Ben', 'UK'), (3, 'Cy', null);
    insert into public.books values
      (10, 'Alpha', 2001, 1, 2), (11, 'Beta', 2005, 1, null), (12, 'Gamma', 2010, 2, 1), (13, 'Delta', 2012, null, null);
    insert into public.genres values (100, 'fiction'), (101, 'history'), (102, 'poetry');
    insert into public.book_genres values (10, 100), (10, 101), (11, 102), (12, 100);
    insert into public.author_profiles values (1, 'Writes'), (2, 'Edits');
    insert into public.employees values (1, 'Boss', null), (2, 'Mid', 1), (3, 'Low', 2), (4, 'Also low', 2);`);
  await ctx.db.query(`insert into public.reviews values (1, 10, $1, 5), (2, 10, $2, 2), (3, 11, $1, 4)`, [alice.id, bob.id]);
});

const books = () => serviceClient(ctx.idp).from('books');
const authors = () => serviceClient(ctx.idp).from('authors');
const rest = (method: string, path: string, opts: Parameters<typeof idpRequest>[3] = {}) =>
  idpRequest(ctx.idp, method, `/rest/v1/${path}`, { apikey: ctx.idp.secretKey, ...opts });

describe('many-to-one, one-to-many, many-to-many', () => {
  test('many-to-one: the related row as an object (null when there is none), named after the foreign key or its column', async () => {
    const { data, error } = await books().select('title, author:authors!author_id(name)').order('id');
    assert.equal(error, null);
    assert.deepEqual(data, [
      { title: 'Alpha', author: { name: 'Ann' } },
      { title: 'Beta', author: { name: 'Ann' } },
      { title: 'Gamma', author: { name: 'Ben' } },
      { title: 'Delta', author: null },
    ]);
    // The foreign key's column and the constraint's name each name one relationship.
    const byColumn = await books().select('title, editor_id(name)').eq('id', 10).single();
    assert.deepEqual(byColumn.data, { title: 'Alpha', editor_id: { name: 'Ben' } });
    const byConstraint = await books().select('books_editor_id_fkey(name)').eq('id', 12).single();
    assert.deepEqual(byConstraint.data, { books_editor_id_fkey: { name: 'Ann' } });
  });

  test('one-to-many: an array (empty when there is none); filters, order, limit and offset apply inside the embed', async () => {
    const { data, error } = await authors()
      .select('name, books!author_id(title, published)')
      .order('id')
      .order('published', { referencedTable: 'books', ascending: false });
    assert.equal(error, null);
    assert.deepEqual(data, [
      {
        name: 'Ann',
        books: [
          { title: 'Beta', published: 2005 },
          { title: 'Alpha', published: 2001 },
        ],
      },
      { name: 'Ben', books: [{ title: 'Gamma', published: 2010 }] },
      { name: 'Cy', books: [] },
    ]);
    const filtered = await authors().select('name, books!author_id(title)').eq('id', 1).gt('books.published', 2002).single();
    assert.deepEqual(filtered.data, { name: 'Ann', books: [{ title: 'Beta' }] });
    const paged = await authors()
      .select('name, books!author_id(title)')
      .eq('id', 1)
      .order('title', { referencedTable: 'books' })
      .range(1, 1, { referencedTable: 'books' })
      .single();
    assert.deepEqual(paged.data, { name: 'Ann', books: [{ title: 'Beta' }] });
    const limited = await authors()
      .select('name, books!author_id(title)')
      .eq('id', 1)
      .order('title', { referencedTable: 'books' })
      .limit(1, { referencedTable: 'books' })
      .single();
    assert.deepEqual(limited.data, { name: 'Ann', books: [{ title: 'Alpha' }] });
  });

  test('many-to-many through the junction table, from both sides, and named by the junction as a hint', async () => {
    const { data } = await books().select('title, genres(name)').order('id').order('name', { referencedTable: 'genres' });
    assert.deepEqual(data, [
      { title: 'Alpha', genres: [{ name: 'fiction' }, { name: 'history' }] },
      { title: 'Beta', genres: [{ name: 'poetry' }] },
      { title: 'Gamma', genres: [{ name: 'fiction' }] },
      { title: 'Delta', genres: [] },
    ]);
    const back = await serviceClient(ctx.idp)
      .from('genres')
      .select('name, books(title)')
      .eq('id', 100)
      .order('title', { referencedTable: 'books' })
      .single();
    assert.deepEqual(back.data, { name: 'fiction', books: [{ title: 'Alpha' }, { title: 'Gamma' }] });
    const hinted = await books().select('title, genres!book_genres(name)').eq('id', 11).single();
    assert.deepEqual(hinted.data, { title: 'Beta', genres: [{ name: 'poetry' }] });
  });

  test('one-to-one (a foreign key that is also the primary key): an object both ways', async () => {
    const { data } = await authors().select('name, author_profiles(bio)').order('id');
    assert.deepEqual(data, [
      { name: 'Ann', author_profiles: { bio: 'Writes' } },
      { name: 'Ben', author_profiles: { bio: 'Edits' } },
      { name: 'Cy', author_profiles: null },
    ]);
    const back = await serviceClient(ctx.idp).from('author_profiles').select('bio, authors(name)').eq('author_id', 2).single();
    assert.deepEqual(back.data, { bio: 'Edits', authors: { name: 'Ben' } });
  });

  test('a table related to itself: the foreign key column for the parent, the table for the children', async () => {
    const { data } = await serviceClient(ctx.idp)
      .from('employees')
      .select('name, manager_id(name), reports:employees(name)')
      .eq('id', 2)
      .order('id', { referencedTable: 'employees' })
      .single();
    assert.deepEqual(data, { name: 'Mid', manager_id: { name: 'Boss' }, reports: [{ name: 'Low' }, { name: 'Also low' }] });
  });

  test('nested embeds, aliases on columns and resources', async () => {
    const { data } = await books()
      .select('heading:title, writer:authors!author_id(name, profile:author_profiles(bio), books!author_id(title))')
      .eq('id', 12)
      .single();
    assert.deepEqual(data, { heading: 'Gamma', writer: { name: 'Ben', profile: { bio: 'Edits' }, books: [{ title: 'Gamma' }] } });
  });
});

describe('hints, joins, spreads and null filters', () => {
  test('!inner keeps only the rows whose embedded resource matches; !left (the default) keeps them all', async () => {
    const inner = await books().select('title, authors!author_id!inner(name)').eq('authors.country', 'NZ').order('id');
    assert.deepEqual(inner.data, [
      { title: 'Alpha', authors: { name: 'Ann' } },
      { title: 'Beta', authors: { name: 'Ann' } },
    ]);
    // supabase-js's types do not know !left, though PostgREST (and the idp) do.
    const left = await books()
      .select('title, authors!author_id!left(name)' as 'title, authors!author_id(name)')
      .eq('authors.country', 'NZ')
      .order('id');
    assert.deepEqual(
      left.data?.map((b) => b.authors),
      [{ name: 'Ann' }, { name: 'Ann' }, null, null],
    );
    const innerMany = await authors().select('name, books!author_id!inner(title)').like('books.title', '*a').order('id');
    assert.deepEqual(innerMany.data, [
      { name: 'Ann', books: [{ title: 'Alpha' }, { title: 'Beta' }] },
      { name: 'Ben', books: [{ title: 'Gamma' }] },
    ]);
    // The count agrees with the rows an inner embed keeps.
    const counted = await books().select('title, authors!author_id!inner(name)', { count: 'exact' }).eq('authors.country', 'UK');
    assert.equal(counted.count, 1);
  });

  test('not.is.null / is.null on an embedded resource', async () => {
    const withAuthor = await books().select('title, authors!author_id(name)').not('authors', 'is', null).order('id');
    assert.deepEqual(
      withAuthor.data?.map((b) => b.title),
      ['Alpha', 'Beta', 'Gamma'],
    );
    const withoutGenres = await books().select('title, genres(name)').is('genres', null);
    assert.deepEqual(
      withoutGenres.data?.map((b) => b.title),
      ['Delta'],
    );
    const counted = await books().select('title, genres()', { count: 'exact', head: true }).not('genres', 'is', null);
    assert.equal(counted.count, 3);
  });

  test("spread: a to-one resource's columns become the parent's own; a to-many one is PGRST119", async () => {
    const { data } = await books().select('title, ...authors!author_id(author:name, country)').eq('id', 12).single();
    assert.deepEqual(data, { title: 'Gamma', author: 'Ben', country: 'UK' });
    const refused = await authors().select('name, ...books!author_id(title)');
    assert.equal(refused.status, 400);
    assert.deepEqual(refused.error, {
      code: 'PGRST119',
      details: "'authors' and 'books' do not form a many-to-one or one-to-one relationship",
      hint: null,
      message: "A spread operation on 'books' is not possible",
    });
  });

  test('order by a to-one related column; on a to-many one it is PGRST118', async () => {
    const { data } = await books()
      .select('title, authors!author_id(name)')
      .not('author_id', 'is', null)
      .order('authors(name)', { ascending: false })
      .order('id');
    assert.deepEqual(
      data?.map((b) => b.title),
      ['Gamma', 'Alpha', 'Beta'],
    );
    const refused = await rest('GET', 'authors?select=name,books!author_id(title)&order=books(title)');
    assert.equal(refused.status, 400);
    assert.equal((refused.body as { code: string }).code, 'PGRST118');
  });

  test('an empty embed (`authors()`) filters without adding a key', async () => {
    const { data } = await books().select('title, authors!author_id!inner()').eq('authors.name', 'Ben');
    assert.deepEqual(data, [{ title: 'Gamma' }]);
  });
});

describe("errors in PostgREST's words", () => {
  test('no relationship: 400 PGRST200 with what was searched and a near name', async () => {
    const { error, status } = await books().select('title, author(name)');
    assert.equal(status, 400);
    assert.deepEqual(error, {
      code: 'PGRST200',
      details: "Searched for a foreign key relationship between 'books' and 'author' in the schema 'public', but no matches were found.",
      hint: "Perhaps you meant 'authors' instead of 'author'.",
      message: "Could not find a relationship between 'books' and 'author' in the schema cache",
    });
    const hinted = await books().select('title, authors!nope(name)');
    assert.deepEqual(hinted.error, {
      code: 'PGRST200',
      details:
        "Searched for a foreign key relationship between 'books' and 'authors' using the hint 'nope' in the schema 'public', but no matches were found.",
      hint: null,
      message: "Could not find a relationship between 'books' and 'authors' in the schema cache",
    });
  });

  test('two relationships: 300 PGRST201 listing both, with the hints that choose one', async () => {
    const { error, status } = await books().select('title, authors(name)');
    assert.equal(status, 300);
    assert.deepEqual(error, {
      code: 'PGRST201',
      details: [
        {
          cardinality: 'many-to-one',
          embedding: 'books with authors',
          relationship: 'books_author_id_fkey using books(author_id) and authors(id)',
        },
        {
          cardinality: 'many-to-one',
          embedding: 'books with authors',
          relationship: 'books_editor_id_fkey using books(editor_id) and authors(id)',
        },
      ],
      hint: "Try changing 'authors' to one of the following: 'authors!books_author_id_fkey', 'authors!books_editor_id_fkey'. Find the desired relationship in the 'details' key.",
      message: "Could not embed because more than one relationship was found for 'books' and 'authors'",
    });
  });

  test('a parameter for a resource that is not embedded: PGRST108', async () => {
    const { error, status } = await books().select('title').eq('genres.name', 'fiction');
    assert.equal(status, 400);
    assert.deepEqual(error, {
      code: 'PGRST108',
      details: null,
      hint: "Verify that 'genres' is included in the 'select' query parameter.",
      message: "'genres' is not an embedded resource in this request",
    });
  });
});

describe('as the caller, under row-level security', () => {
  test('each user sees only the embedded rows their policies show; anon is refused by the grant', async () => {
    const mine = async (token: string) =>
      (await userClient(ctx.idp, token).from('books').select('title, reviews(stars)').in('id', [10, 11]).order('id')).data;
    assert.deepEqual(await mine(alice.token), [
      { title: 'Alpha', reviews: [{ stars: 5 }] },
      { title: 'Beta', reviews: [{ stars: 4 }] },
    ]);
    assert.deepEqual(await mine(bob.token), [
      { title: 'Alpha', reviews: [{ stars: 2 }] },
      { title: 'Beta', reviews: [] },
    ]);
    const anon = await userClient(ctx.idp).from('books').select('title, reviews(stars)');
    assert.equal(anon.status, 401);
    assert.equal(anon.error?.code, '42501');
    // An !inner embed filters by what the caller may see.
    const innerOnly = await userClient(ctx.idp, bob.token).from('books').select('title, reviews!inner(stars)');
    assert.deepEqual(innerOnly.data, [{ title: 'Alpha', reviews: [{ stars: 2 }] }]);
  });

  test('a write answers with its embedded resources (inserted rows joined in the same statement)', async () => {
    const { data, error, status } = await books()
      .insert({ id: 14, title: 'Epsilon', author_id: 3 })
      .select('title, authors!author_id(name)')
      .single();
    assert.equal(error, null);
    assert.equal(status, 201);
    assert.deepEqual(data, { title: 'Epsilon', authors: { name: 'Cy' } });
    const review = await userClient(ctx.idp, alice.token)
      .from('reviews')
      .insert({ id: 4, book_id: 14, stars: 3 })
      .select('stars, books(title)')
      .single();
    assert.equal(review.error, null);
    assert.deepEqual(review.data, { stars: 3, books: { title: 'Epsilon' } });
  });
});
